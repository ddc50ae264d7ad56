/* fs.h - file-system helpers shared by the layers above. */
#ifndef NR_FS_H
#define NR_FS_H

/* Removes path and, when it is a directory, everything under it. A symbolic link is removed
 * itself, never followed (what it points to stays). Errors are ignored: what could not be
 * removed stays. */
void nr_remove_tree(const char *path);

/* A new directory of the process's own under $TMPDIR (else /tmp), named <prefix>XXXXXX
 * (mkdtemp); NULL with errno set when it cannot be made. To free. */
char *nr_make_tmpdir(const char *prefix);

#endif
