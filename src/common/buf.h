/* buf.h - growable byte buffer (string builder) and read-only views.
 * A buffer belongs to one thread at a time; nothing here locks.
 */
#ifndef NR_BUF_H
#define NR_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} nr_buf_t;

typedef struct {
    const char *data;
    size_t len;
} nr_view_t;

void nr_buf_init(nr_buf_t *b);
void nr_buf_free(nr_buf_t *b);
void nr_buf_reset(nr_buf_t *b); /* len = 0, memory kept */
void nr_buf_reserve(nr_buf_t *b, size_t extra);
/* The same for sizes from the wire: false (b unchanged) when the memory
 * cannot be had, instead of aborting. */
bool nr_buf_try_reserve(nr_buf_t *b, size_t extra);
void nr_buf_append(nr_buf_t *b, const void *p, size_t n);
void nr_buf_puts(nr_buf_t *b, const char *s);
void nr_buf_putc(nr_buf_t *b, char c);
void nr_buf_printf(nr_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nr_buf_vprintf(nr_buf_t *b, const char *fmt, va_list ap);
/* Appends s as a JSON string literal, quotes included. */
void nr_buf_json_str(nr_buf_t *b, const char *s, size_t n);
void nr_buf_u64(nr_buf_t *b, uint64_t v);
void nr_buf_i64(nr_buf_t *b, int64_t v);
/* A double exactly as Triton's JSON writer (rapidjson, Grisu2) prints it:
 * 100 -> "100.0", 0.1f -> "0.10000000149011612", NaN -> "NaN", inf -> "Infinity".
 * Implemented in dtoa.c. */
void nr_buf_double(nr_buf_t *b, double v);
/* The same text written at out, which has room for NR_DTOA_MAX bytes (the longest is 25:
 * "-0.00000" and 17 digits, or "-1." 16 digits "e-308"); returns its end, unterminated. */
#define NR_DTOA_MAX 32
char *nr_dtoa(char *out, double v);
/* Appends the bytes of the file at path: 0, the errno of the open or read
 * that failed, or EFBIG once more than `max` bytes were seen (b then holds
 * the first `max` of them). */
int nr_buf_read_file(nr_buf_t *b, const char *path, size_t max);
/* Takes the memory; b is left empty. Result is NUL-terminated. */
char *nr_buf_steal(nr_buf_t *b, size_t *len);

#endif
