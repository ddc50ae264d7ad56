/* buf.c - growable byte buffer, JSON string escaping and number formatting.
 * Not thread-safe by design: a buffer has one owner.
 */
#include "buf.h"

#include "alloc.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nr_buf_init(nr_buf_t *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void nr_buf_free(nr_buf_t *b)
{
    free(b->data);
    nr_buf_init(b);
}

void nr_buf_reset(nr_buf_t *b)
{
    b->len = 0;
}

bool nr_buf_try_reserve(nr_buf_t *b, size_t extra)
{
    if (extra < b->cap - b->len) /* room for extra and the NUL */
        return true;
    if (extra > SIZE_MAX / 4 - b->len)
        return false;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL)
        return false;
    b->data = p;
    b->cap = cap;
    return true;
}

void nr_buf_reserve(nr_buf_t *b, size_t extra)
{
    if (!nr_buf_try_reserve(b, extra))
        nr_oom(b->len + extra + 1);
}

void nr_buf_append(nr_buf_t *b, const void *p, size_t n)
{
    nr_buf_reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void nr_buf_puts(nr_buf_t *b, const char *s)
{
    nr_buf_append(b, s, strlen(s));
}

void nr_buf_putc(nr_buf_t *b, char c)
{
    nr_buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void nr_buf_vprintf(nr_buf_t *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n <= 0)
        return;
    nr_buf_reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void nr_buf_printf(nr_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nr_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void nr_buf_json_str(nr_buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    nr_buf_reserve(b, n + 2);
    nr_buf_putc(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        nr_buf_append(b, s + start, i - start);
        start = i + 1;
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t elen = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        nr_buf_append(b, esc, elen);
    }
    nr_buf_append(b, s + start, n - start);
    nr_buf_putc(b, '"');
}

void nr_buf_u64(nr_buf_t *b, uint64_t v)
{
    char tmp[24];
    int i = (int)sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    nr_buf_append(b, tmp + i, sizeof(tmp) - (size_t)i);
}

void nr_buf_i64(nr_buf_t *b, int64_t v)
{
    if (v < 0) {
        nr_buf_putc(b, '-');
        nr_buf_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        nr_buf_u64(b, (uint64_t)v);
    }
}

char *nr_buf_steal(nr_buf_t *b, size_t *len)
{
    if (b->data == NULL)
        nr_buf_reserve(b, 0), b->data[0] = '\0';
    char *p = b->data;
    if (len)
        *len = b->len;
    nr_buf_init(b);
    return p;
}

int nr_buf_read_file(nr_buf_t *b, const char *path, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno;
    char chunk[65536];
    size_t got, seen = 0;
    int rc = 0;
    while (rc == 0 && (got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (got > max - seen) {
            got = max - seen;
            rc = EFBIG;
        }
        nr_buf_append(b, chunk, got);
        seen += got;
    }
    if (rc == 0 && ferror(f))
        rc = errno ? errno : EIO;
    fclose(f);
    return rc;
}
