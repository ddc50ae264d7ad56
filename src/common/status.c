/* status.c - nr_status_t and the only mapping from Triton codes to HTTP and gRPC.
 * Thread-safe: statuses are plain heap objects owned by whoever holds them.
 */
#include "status.h"

#include "alloc.h"
#include "limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int http;
    int grpc;
} code_table[] = {
#define NR_X(c, s, h, g) {s, h, g},
    NR_STATUS_CODE_MAP(NR_X)
#undef NR_X
};

/* The message, whole when its memory can be had: it may quote a name or an id
 * of any length from the wire, and an allocation of that size must not abort.
 * Otherwise its first NR_MAX_ERROR_MSG bytes, ending in "...". */
static char *capped(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) /* beyond INT_MAX bytes */
        return nr_strdup("(error message too long to print)");
    size_t len = (size_t)n;
    char *s = malloc(len + 1);
    if (s == NULL) {
        len = len < NR_MAX_ERROR_MSG ? len : NR_MAX_ERROR_MSG;
        s = nr_malloc(len + 1);
    }
    vsnprintf(s, len + 1, fmt, ap);
    if ((size_t)n > len)
        memcpy(s + len - 3, "...", 3);
    return s;
}

static char *capped_printf(const char *fmt, ...) NR_PRINTF(1, 2);
static char *capped_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = capped(fmt, ap);
    va_end(ap);
    return s;
}

nr_status_t *nr_status_newv(nr_code_t code, const char *fmt, va_list ap)
{
    nr_status_t *st = nr_malloc(sizeof(*st));
    st->code = code;
    st->msg = capped(fmt, ap);
    return st;
}

nr_status_t *nr_status_new(nr_code_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nr_status_t *st = nr_status_newv(code, fmt, ap);
    va_end(ap);
    return st;
}

nr_status_t *nr_status_prefix(nr_status_t *st, const char *fmt, ...)
{
    if (st == NULL)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    char *pre = capped(fmt, ap);
    va_end(ap);
    char *joined = capped_printf("%s%s", pre, st->msg);
    free(pre);
    free(st->msg);
    st->msg = joined;
    return st;
}

void nr_status_free(nr_status_t *st)
{
    if (st == NULL)
        return;
    free(st->msg);
    free(st);
}

const char *nr_status_code_name(nr_code_t code)
{
    if ((unsigned)code >= sizeof(code_table) / sizeof(code_table[0]))
        return "Unknown";
    return code_table[code].name;
}

int nr_status_http(const nr_status_t *st)
{
    return st == NULL ? 200 : code_table[st->code].http;
}

int nr_status_grpc(const nr_status_t *st)
{
    return st == NULL ? 0 : code_table[st->code].grpc;
}

const char *nr_status_msg(const nr_status_t *st)
{
    return st == NULL ? "" : st->msg;
}
