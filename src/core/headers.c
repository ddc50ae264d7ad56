/* headers.c - header names matched for forwarding (headers.h). */
#include "headers.h"

#include "../common/alloc.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

struct nr_header_fwd_s {
    regex_t re;
};

nr_status_t *nr_header_fwd_new(const char *flag, const char *pattern, nr_header_fwd_t **out)
{
    int cflags = REG_EXTENDED | REG_NOSUB | REG_ICASE;
    if (!strncmp(pattern, "(?-i)", 5)) { /* Triton's way to ask for case-sensitive names */
        cflags &= ~REG_ICASE;
        pattern += 5;
    } else if (!strncmp(pattern, "(?i)", 4)) {
        pattern += 4;
    }
    nr_header_fwd_t *f = nr_calloc(1, sizeof(*f));
    int rc = regcomp(&f->re, pattern, cflags);
    if (rc != 0) {
        char why[256];
        regerror(rc, &f->re, why, sizeof(why));
        free(f);
        return nr_status_new(NR_INVALID_ARG, "--%s: invalid regular expression '%s': %s", flag,
                             pattern, why);
    }
    *out = f;
    return NULL;
}

void nr_header_fwd_free(nr_header_fwd_t *f)
{
    if (f == NULL)
        return;
    regfree(&f->re);
    free(f);
}

bool nr_header_fwd_match(const nr_header_fwd_t *f, const char *name, size_t len)
{
    char small[256];
    char *s = len < sizeof(small) ? small : nr_malloc(len + 1);
    memcpy(s, name, len);
    s[len] = '\0';
    bool m = regexec(&f->re, s, 0, NULL, 0) == 0;
    if (s != small)
        free(s);
    return m;
}
