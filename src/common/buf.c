/* buf.c - growable byte buffer, JSON string escaping and number formatting.
 * Not thread-safe by design: a buffer has one owner.
 */
#include "buf.h"

#include "alloc.h"

#include <math.h>
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

void nr_buf_reserve(nr_buf_t *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = nr_realloc(b->data, cap);
    b->cap = cap;
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

/* Shortest round-trip digits of |v| (v finite, non-zero): digits and the
 * decimal exponent k such that v = 0.d1d2.. * 10^(k) style is avoided; we
 * return digits and exp10 such that v = d1.d2d3... * 10^exp10. */
static int shortest_digits(double v, char *digits, int *exp10)
{
    char tmp[40];
    for (int prec = 0; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    /* tmp = "d.ddde[+-]xx" */
    int n = 0;
    const char *p = tmp;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[n++] = *p;
    *exp10 = atoi(p + 1);
    while (n > 1 && digits[n - 1] == '0')
        n--;
    digits[n] = '\0';
    return n;
}

void nr_buf_double(nr_buf_t *b, double v)
{
    if (isnan(v)) {
        nr_buf_puts(b, "NaN");
        return;
    }
    if (isinf(v)) {
        nr_buf_puts(b, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (signbit(v)) {
        nr_buf_putc(b, '-');
        v = -v;
    }
    if (v == 0) {
        nr_buf_puts(b, "0.0");
        return;
    }
    char d[24];
    int e;
    int len = shortest_digits(v, d, &e);
    int kk = e + 1; /* position of the decimal point after the first kk digits */
    if (kk >= len && kk <= 21) {
        nr_buf_append(b, d, (size_t)len);
        for (int i = len; i < kk; i++)
            nr_buf_putc(b, '0');
        nr_buf_puts(b, ".0");
    } else if (kk > 0 && kk <= 21) {
        nr_buf_append(b, d, (size_t)kk);
        nr_buf_putc(b, '.');
        nr_buf_append(b, d + kk, (size_t)(len - kk));
    } else if (kk > -6 && kk <= 0) {
        nr_buf_puts(b, "0.");
        for (int i = kk; i < 0; i++)
            nr_buf_putc(b, '0');
        nr_buf_append(b, d, (size_t)len);
    } else {
        nr_buf_putc(b, d[0]);
        if (len > 1) {
            nr_buf_putc(b, '.');
            nr_buf_append(b, d + 1, (size_t)(len - 1));
        }
        nr_buf_printf(b, "e%d", e);
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
