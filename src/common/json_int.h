/* json_int.h - what the JSON reader's two files share (not a public API):
 * json.c parses and checks documents, json_span.c reads the leaves of spans
 * (tensor data) that json.c checked. Character classes and the parts of the
 * number grammar both need.
 */
#ifndef NR_JSON_INT_H
#define NR_JSON_INT_H

#include "json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline bool nr__json_is_digit(char c)
{
    return (unsigned)(c - '0') <= 9;
}

static inline bool nr__json_is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The end of the run of digits at s[i], eight bytes at a time while they
 * last: a byte is a digit when its high nibble is 3 and adding 6 to it
 * leaves that so (no carry crosses a byte). */
static inline size_t nr__json_skip_digits(const char *s, size_t n, size_t i)
{
    const uint64_t hi = 0xF0F0F0F0F0F0F0F0ull, three = 0x3030303030303030ull;
    while (n - i >= 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        if ((x & hi) != three || ((x + 0x0606060606060606ull) & hi) != three)
            break;
        i += 8;
    }
    while (i < n && nr__json_is_digit(s[i]))
        i++;
    return i;
}

/* The integer of the digits s[d0, end) (no leading zero unless alone), with
 * its sign, into *v as the DOM holds it (INT, or UINT above INT64_MAX);
 * false when it does not fit 64 bits (the DOM then holds a REAL). */
bool nr__json_int_value(const char *s, size_t d0, size_t end, bool neg, nr_jv_t *v);

/* NaN / Infinity (rapidjson kParseNanAndInfFlag) at s[i], after an optional
 * '-' at s[*pi], into *v (unless NULL); *pi moves past it. Anything else is
 * "Invalid value." at *pi (returned, with *err_at). */
const char *nr__json_special(const char *s, size_t n, size_t *pi, size_t i, bool neg, nr_jv_t *v,
                             size_t *err_at);

#endif
