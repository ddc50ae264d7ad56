/* log.h - Triton-format log lines through level-checked macros.
 *
 *   I1202 14:30:39.518700 2991 repository.c:117] successfully loaded 'simple'
 *
 * Settings are set by main() before any thread starts; the level flags and the
 * format may change while serving (the logging extension), so they are atomics
 * (a relaxed load on every check). Each line is written with one write(2) so
 * lines from different threads never interleave.
 */
#ifndef NR_LOG_H
#define NR_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

typedef enum { NR_LOG_LVL_ERROR, NR_LOG_LVL_WARN, NR_LOG_LVL_INFO, NR_LOG_LVL_VERBOSE } nr_log_level_t;

typedef struct {
    _Atomic bool info, warn, error;
    _Atomic int verbose;
    _Atomic bool iso8601;
    int fd;           /* where lines go; stderr unless --log-file (fixed at start) */
    const char *file; /* --log-file, or NULL (fixed at start) */
} nr_log_settings_t;

extern nr_log_settings_t nr_log_settings;

void nr_log_write(nr_log_level_t lvl, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints a Triton-style table (+---+ dividers, | cell | rows) as one INFO entry. */
void nr_log_table(const char *file, int line, int ncols, const char *const *header,
                  int nrows, const char *const *cells);

#define NR__FILE (__builtin_strrchr(__FILE__, '/') ? __builtin_strrchr(__FILE__, '/') + 1 : __FILE__)
#define NR_LOG_INFO(...)                                                   \
    do {                                                                   \
        if (nr_log_settings.info)                                          \
            nr_log_write(NR_LOG_LVL_INFO, NR__FILE, __LINE__, __VA_ARGS__); \
    } while (0)
#define NR_LOG_WARN(...)                                                   \
    do {                                                                   \
        if (nr_log_settings.warn)                                          \
            nr_log_write(NR_LOG_LVL_WARN, NR__FILE, __LINE__, __VA_ARGS__); \
    } while (0)
#define NR_LOG_ERROR(...)                                                   \
    do {                                                                    \
        if (nr_log_settings.error)                                          \
            nr_log_write(NR_LOG_LVL_ERROR, NR__FILE, __LINE__, __VA_ARGS__); \
    } while (0)
#define NR_LOG_VERBOSE(lvl, ...)                                              \
    do {                                                                      \
        if (nr_log_settings.verbose >= (lvl))                                 \
            nr_log_write(NR_LOG_LVL_VERBOSE, NR__FILE, __LINE__, __VA_ARGS__); \
    } while (0)
#define NR_LOG_TABLE(ncols, header, nrows, cells) \
    do {                                                                      \
        if (nr_log_settings.info)                                             \
            nr_log_table(NR__FILE, __LINE__, ncols, header, nrows, cells);    \
    } while (0)

#endif
