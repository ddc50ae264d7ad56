/* cli.c - see cli.h. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool nr_cli_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "on", "1", "True", "TRUE", "ON"};
    static const char *const no[] = {"false", "off", "0", "False", "FALSE", "OFF"};
    for (size_t i = 0; v != NULL && i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!strcmp(v, yes[i]))
            return *out = true, true;
        if (!strcmp(v, no[i]))
            return *out = false, true;
    }
    return false;
}

bool nr_cli_int(const char *v, long long lo, long long hi, long long *out)
{
    if (v == NULL)
        return false;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

bool nr_cli_u64(const char *v, uint64_t *out)
{
    if (v == NULL || *v == '-' || *v == '\0')
        return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end != '\0')
        return false;
    *out = x;
    return true;
}

bool nr_cli_double(const char *v, double min, double *out)
{
    if (v == NULL || *v == '\0')
        return false;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (*end != '\0' || errno != 0 || isnan(x) || x < min)
        return false;
    *out = x;
    return true;
}

const nr_cli_opt_t *nr_cli_find(const nr_cli_opt_t *t, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(t[i].name) == len && memcmp(t[i].name, name, len) == 0)
            return &t[i];
    return NULL;
}

nr_status_t *nr_cli_bad_value(const char *v)
{
    return nr_status_new(NR_INVALID_ARG, "Invalid option value. Got %s", v ? v : "");
}

nr_status_t *nr_cli_set(const nr_cli_opt_t *o, void *opts, const char *v)
{
    char *dst = (char *)opts + o->offset;
    long long x;
    uint64_t u;
    bool b;
    switch (o->kind) {
    case NR_CLI_BOOL:
        if (!nr_cli_bool(v, &b))
            return nr_cli_bad_value(v);
        *(bool *)dst = b;
        return NULL;
    case NR_CLI_INT:
        if (!nr_cli_int(v, o->lo, o->hi, &x))
            return nr_cli_bad_value(v);
        *(int *)dst = (int)x;
        return NULL;
    case NR_CLI_U64:
        if (!nr_cli_u64(v, &u) || u < (uint64_t)o->lo || u > (uint64_t)o->hi)
            return nr_cli_bad_value(v);
        *(uint64_t *)dst = u;
        return NULL;
    case NR_CLI_STR:
        if (v == NULL)
            return nr_cli_bad_value(v);
        *(const char **)dst = v;
        return NULL;
    default: /* NR_CLI_FN, NR_CLI_FLAG: the option's own setter */
        return o->set != NULL ? o->set(opts, o, v) : NULL;
    }
}

#define HELP_COLUMN 35

void nr_cli_usage(FILE *f, const nr_cli_opt_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (t[i].help == NULL)
            continue;
        int w = fprintf(f, "  --%s%s", t[i].name, t[i].arg ? t[i].arg : "");
        const char *h = t[i].help;
        if (w >= HELP_COLUMN - 1 && h[0] != '\0') {
            fputc('\n', f);
            w = 0;
        }
        for (;;) {
            size_t len = strcspn(h, "\n");
            if (len == 0) /* listed, described by the option above */
                fputc('\n', f);
            else
                fprintf(f, "%*s%.*s\n", HELP_COLUMN - w, "", (int)len, h);
            w = 0;
            if (h[len] == '\0')
                break;
            h += len + 1;
        }
    }
}
