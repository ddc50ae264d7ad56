/* status.h - the one error type of nereid.
 *
 * A function that can fail for a reason a user should read returns nr_status_t *.
 * NULL means success, so the success path allocates nothing. The caller owns a
 * non-NULL status: it returns it upward, or reports it and calls nr_status_free.
 * Codes and wording are Triton's; the HTTP and gRPC mapping lives only in status.c.
 */
#ifndef NR_STATUS_H
#define NR_STATUS_H

#include <stdarg.h>

#define NR_MUST_CHECK __attribute__((warn_unused_result))
#define NR_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* X(code, name as Triton prints it, HTTP status, gRPC status code) */
#define NR_STATUS_CODE_MAP(X)                        \
    X(UNKNOWN, "Unknown", 400, 2)                    \
    X(INTERNAL, "Internal", 500, 13)                 \
    X(NOT_FOUND, "Not found", 404, 5)                \
    X(INVALID_ARG, "Invalid argument", 400, 3)       \
    X(UNAVAILABLE, "Unavailable", 503, 14)           \
    X(UNSUPPORTED, "Unsupported", 501, 12)           \
    X(ALREADY_EXISTS, "Already exists", 400, 6)      \
    X(CANCELLED, "Cancelled", 400, 1)

typedef enum {
#define NR_X(c, s, h, g) NR_##c,
    NR_STATUS_CODE_MAP(NR_X)
#undef NR_X
} nr_code_t;

typedef struct nr_status_s {
    nr_code_t code;
    char *msg; /* owned, NUL-terminated */
} nr_status_t;

NR_MUST_CHECK nr_status_t *nr_status_new(nr_code_t code, const char *fmt, ...) NR_PRINTF(2, 3);
NR_MUST_CHECK nr_status_t *nr_status_newv(nr_code_t code, const char *fmt, va_list ap);
/* Prepends "prefix" to st's message; returns st. */
nr_status_t *nr_status_prefix(nr_status_t *st, const char *fmt, ...) NR_PRINTF(2, 3);
void nr_status_free(nr_status_t *st);

const char *nr_status_code_name(nr_code_t code); /* "Internal", "Invalid argument", ... */
int nr_status_http(const nr_status_t *st);     /* 200 for NULL */
int nr_status_grpc(const nr_status_t *st);     /* 0 for NULL */
const char *nr_status_msg(const nr_status_t *st);

#endif
