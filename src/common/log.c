/* log.c - formats Triton-style log lines and tables; one write(2) per entry.
 * Called from any thread.
 */
#include "log.h"

#include "alloc.h"
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

nr_log_settings_t nr_log_settings = {true, true, true, 0, false, 2, NULL};

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void prefix(nr_buf_t *b, nr_log_level_t lvl, const char *file, int line)
{
    static const char letters[] = {'E', 'W', 'I', 'V'};
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    if (nr_log_settings.iso8601)
        nr_buf_printf(b, "%04d-%02d-%02dT%02d:%02d:%02dZ %c %d %s:%d] ", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, letters[lvl],
                      (int)getpid(), file, line);
    else
        nr_buf_printf(b, "%c%02d%02d %02d:%02d:%02d.%06ld %d %s:%d] ", letters[lvl], tm.tm_mon + 1,
                      tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec,
                      (int)getpid(), file, line);
}

void nr_log_write(nr_log_level_t lvl, const char *file, int line, const char *fmt, ...)
{
    nr_buf_t b;
    nr_buf_init(&b);
    prefix(&b, lvl, file, line);
    va_list ap;
    va_start(ap, fmt);
    nr_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    nr_buf_append(&b, "\n", 1);
    write_all(nr_log_settings.fd, b.data, b.len);
    nr_buf_free(&b);
}

static void divider(nr_buf_t *b, int ncols, const size_t *w)
{
    for (int c = 0; c < ncols; c++) {
        nr_buf_append(b, "+", 1);
        for (size_t i = 0; i < w[c] + 2; i++)
            nr_buf_append(b, "-", 1);
    }
    nr_buf_append(b, "+\n", 2);
}

static void row(nr_buf_t *b, int ncols, const size_t *w, const char *const *cells)
{
    for (int c = 0; c < ncols; c++) {
        size_t n = strlen(cells[c]);
        nr_buf_printf(b, "| %s", cells[c]);
        for (size_t i = n; i < w[c] + 1; i++)
            nr_buf_append(b, " ", 1);
    }
    nr_buf_append(b, "|\n", 2);
}

void nr_log_table(const char *file, int line, int ncols, const char *const *header, int nrows,
                  const char *const *cells)
{
    size_t *w = nr_calloc((size_t)ncols, sizeof(size_t));
    for (int c = 0; c < ncols; c++) {
        w[c] = strlen(header[c]);
        for (int r = 0; r < nrows; r++) {
            size_t n = strlen(cells[r * ncols + c]);
            if (n > w[c])
                w[c] = n;
        }
    }
    nr_buf_t b;
    nr_buf_init(&b);
    prefix(&b, NR_LOG_LVL_INFO, file, line);
    nr_buf_append(&b, "\n", 1);
    divider(&b, ncols, w);
    row(&b, ncols, w, header);
    divider(&b, ncols, w);
    for (int r = 0; r < nrows; r++)
        row(&b, ncols, w, cells + r * ncols);
    divider(&b, ncols, w);
    nr_buf_append(&b, "\n", 1);
    write_all(nr_log_settings.fd, b.data, b.len);
    nr_buf_free(&b);
    free(w);
}
