/* json_span.c - reading a span (json.h): the leaves of an array that
 * nr_json_parse_opts checked and left as text, in document order, nested
 * arrays flattened; an infer request's `data` goes from here straight into
 * the tensor. The text is known to be valid JSON, so nothing here reports an
 * error: it only finds values. Numbers come first and fast: an integer of up
 * to 19 digits is read inline; a real by Clinger's fast path where that is
 * exact, else by strtod (the double the DOM would hold either way).
 * Allocates nothing, locks nothing.
 */
#include "json.h"

#include "json_int.h"

#include <stdlib.h>

/* Clinger's fast path: a decimal w * 10^e with w <= 2^53 and |e| <= 22 is
 * one exact operation on two exact doubles, so the result is correctly
 * rounded, as strtod's is: the same double. */
static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The fraction and exponent of a real whose integer part, w (sig_digits
 * significant digits), ends at s[i]: its value by the fast path when that
 * applies (true), else false. 16 significant digits or fewer are needed
 * (2^53 has 16): a longer number (a printed random double) is strtod's at
 * once, its digits skipped eight at a time. */
static bool fast_real(const char *s, size_t n, size_t i, uint64_t w, size_t sig_digits, bool neg,
                      double *d, size_t *end)
{
    int64_t e = 0;
    if (s[i] == '.') {
        size_t f0 = ++i;
        i = nr__json_skip_digits(s, n, i);
        if (sig_digits + (i - f0) > 16)
            return false;
        for (size_t k = f0; k < i; k++)
            w = w * 10 + (uint64_t)(s[k] - '0');
        e = -(int64_t)(i - f0);
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        int64_t x = 0;
        for (; i < n && nr__json_is_digit(s[i]); i++)
            if (x < 100000)
                x = x * 10 + (s[i] - '0');
        e += eneg ? -x : x;
    }
    if (w > (1ull << 53) || e < -22 || e > 22)
        return false;
    double r = e < 0 ? (double)w / POW10[-e] : (double)w * POW10[e];
    *d = neg ? -r : r;
    *end = i;
    return true;
}

/* The real at s[start] by strtod; returns where it ends. strtod stops
 * there: a ']' at least follows every number of a span. */
static size_t strtod_leaf(const char *s, size_t start, nr_jv_t *v)
{
    char *stop;
    v->type = NR_JV_REAL;
    v->u.d = strtod(s + start, &stop);
    return (size_t)(stop - s);
}

/* The number at s[i] of text nr_json_parse_opts checked, as number() reads
 * it; returns where it ends. A real is the fast path's or strtod's (which
 * also finds its end). */
static size_t checked_number(const char *s, size_t n, size_t i, nr_jv_t *v)
{
    size_t start = i;
    bool neg = s[i] == '-';
    i += neg;
    if (i >= n || !nr__json_is_digit(s[i])) {
        size_t at;
        if (nr__json_special(s, n, &start, i, neg, v, &at) != NULL)
            return n; /* not text nr_json_parse_opts checked */
        return start;
    }
    size_t d0 = i;
    uint64_t u = 0;
    size_t fits = n - i > 19 ? i + 19 : n; /* 19 digits never overflow */
    while (i < fits && nr__json_is_digit(s[i]))
        u = u * 10 + (uint64_t)(s[i++] - '0');
    bool more = i < n && (nr__json_is_digit(s[i]) || s[i] == '.' || s[i] == 'e' || s[i] == 'E');
    if (!more && (!neg || u <= (uint64_t)INT64_MAX + 1)) {
        v->type = neg || u <= INT64_MAX ? NR_JV_INT : NR_JV_UINT;
        v->u.i = !neg ? (int64_t)u : u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
        return i;
    }
    v->type = NR_JV_REAL;
    size_t end;
    if (i < n && !nr__json_is_digit(s[i]) &&
        fast_real(s, n, i, u, u ? i - d0 : 0, neg, &v->u.d, &end))
        return end;
    while (i < n && nr__json_is_digit(s[i]))
        i++;
    bool integer = i >= n || (s[i] != '.' && s[i] != 'e' && s[i] != 'E');
    if (integer && nr__json_int_value(s, d0, i, neg, v))
        return i; /* 20 digits that fit */
    return strtod_leaf(s, start, v);
}

void nr_json_leaves_init(nr_json_leaves_t *it, const nr_jv_t *span)
{
    it->s = span->u.str;
    it->n = span->type == NR_JV_SPAN ? span->n : 0;
    it->i = 0;
    it->escaped = false;
}

/* Past the string whose opening quote is at s[i]; the text was checked. */
static size_t string_end(const char *s, size_t n, size_t i, bool *escaped)
{
    for (i++; i < n && s[i] != '"'; i++) {
        if (s[i] == '\\') {
            *escaped = true;
            i++;
        }
    }
    return i + 1;
}

/* A leaf that is not a number at s[i]: a string, an object, a literal. */
static bool other_leaf(nr_json_leaves_t *it, size_t i, nr_jv_t *v)
{
    const char *s = it->s;
    size_t n = it->n;
    v->n = 0;
    switch (s[i]) {
    case '"':
        it->escaped = false;
        it->i = string_end(s, n, i, &it->escaped);
        v->type = NR_JV_STRING;
        v->u.str = s + i + 1;
        v->n = it->i - i - 2;
        return true;
    case '{': { /* skipped whole: only its type matters */
        int depth = 0;
        bool esc;
        do {
            if (s[i] == '"')
                i = string_end(s, n, i, &esc) - 1;
            else if (s[i] == '{' || s[i] == '[')
                depth++;
            else if (s[i] == '}' || s[i] == ']')
                depth--;
            i++;
        } while (depth > 0 && i < n);
        it->i = i;
        v->type = NR_JV_OBJECT;
        return true;
    }
    case 't': it->i = i + 4; v->type = NR_JV_TRUE; return true;
    case 'f': it->i = i + 5; v->type = NR_JV_FALSE; return true;
    case 'n': it->i = i + 4; v->type = NR_JV_NULL; return true;
    default: /* NaN, Infinity */
        it->i = checked_number(s, n, i, v);
        return true;
    }
}

bool nr_json_leaves_next(nr_json_leaves_t *it, nr_jv_t *v)
{
    const char *s = it->s;
    size_t n = it->n;
    for (size_t i = it->i; i < n; i++) {
        char c = s[i];
        if (nr__json_is_digit(c)) {
            /* tensor data: most often up to 19 digits and a separator */
            uint64_t u = (uint64_t)(c - '0');
            size_t j = i + 1, fits = n - i > 19 ? i + 19 : n;
            while (j < fits && nr__json_is_digit(s[j]))
                u = u * 10 + (uint64_t)(s[j++] - '0');
            if (j < n && (s[j] == ',' || s[j] == ']' || nr__json_is_ws(s[j]))) {
                v->type = u <= INT64_MAX ? NR_JV_INT : NR_JV_UINT;
                v->u.i = (int64_t)u;
                v->n = 0;
                it->i = j;
                return true;
            }
            if (j < n && !nr__json_is_digit(s[j])) { /* '.', 'e' or 'E': a real */
                v->type = NR_JV_REAL;
                v->n = 0;
                if (!fast_real(s, n, j, u, u ? j - i : 0, false, &v->u.d, &it->i))
                    it->i = strtod_leaf(s, i, v);
                return true;
            }
        }
        if (nr__json_is_digit(c) || c == '-') {
            v->n = 0;
            it->i = checked_number(s, n, i, v);
            return true;
        }
        if (c != ',' && c != '[' && c != ']' && !nr__json_is_ws(c))
            return other_leaf(it, i, v);
    }
    it->i = n;
    return false;
}

