/* version.h - nereid's version, reported as the server version. */
#ifndef NR_VERSION_H
#define NR_VERSION_H
#define NR_VERSION "0.1.0"
#endif
