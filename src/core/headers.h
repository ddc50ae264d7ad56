/* headers.h - Triton's --http-header-forward-pattern and --grpc-header-forward-pattern: the
 * headers of an inference request whose names match a regular expression become string
 * parameters of the request, which a backend reads as any other (a Python model's
 * request.parameters()). Protocol-neutral: each frontend hands its headers to
 * nr_infer_header (infer.h) through the matcher it built from its flag.
 *
 * The match is Triton's: anywhere in the name (RE2's PartialMatch), case-insensitive as HTTP
 * header names are, unless the pattern starts with "(?-i)". nereid reads the pattern as a
 * POSIX extended regular expression (regcomp), which spells the patterns Triton's
 * documentation shows (PREFIX_.*, a|b, [0-9]+) the same way; RE2's Perl classes (\d, \w)
 * and other inline flags are not POSIX and are refused when the server starts.
 */
#ifndef NR_HEADERS_H
#define NR_HEADERS_H

#include "../common/status.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct nr_header_fwd_s nr_header_fwd_t;

/* The matcher of pattern; INVALID_ARG with regcomp's reason for a pattern it refuses. flag
 * names the option in that message. */
NR_MUST_CHECK nr_status_t *nr_header_fwd_new(const char *flag, const char *pattern,
                                             nr_header_fwd_t **out);
void nr_header_fwd_free(nr_header_fwd_t *f);
/* Whether header name[0, len) is forwarded. Any thread. */
bool nr_header_fwd_match(const nr_header_fwd_t *f, const char *name, size_t len);

#endif
