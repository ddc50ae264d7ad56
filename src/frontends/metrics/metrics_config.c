/* metrics_config.c - the metrics options: defaults, --metrics-config
 * <setting>=<value> with Triton 2.51's checks and texts, and the
 * summary_quantiles list (Triton's MetricReporterConfig: settings compared as
 * exact strings, bad quantile pairs skipped with an error in the log).
 */
#include "metrics_int.h"

#include "../../common/alloc.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void nr_metrics_options_default(nr_metrics_options_t *o)
{
    memset(o, 0, sizeof(*o));
    o->port = 8002;
    o->interval_ms = 2000;
    o->cpu = true;
    o->counters = true;
}

nr_status_t *nr_metrics_config_set(nr_metrics_options_t *o, const char *arg)
{
    /* Triton: "<setting>=<value>", both non-empty; a group ("<name>,<setting>=")
     * is not allowed for metrics. */
    const char *eq = strchr(arg, '=');
    const char *comma = strchr(arg, ',');
    if (eq == NULL || eq == arg || eq[1] == '\0' || (comma != NULL && comma < eq))
        return nr_status_new(NR_INVALID_ARG,
                             "--metrics-config option format is <setting>=<value>. Got %s", arg);
    size_t klen = (size_t)(eq - arg);
    const char *v = eq + 1;
    if (klen == 17 && memcmp(arg, "summary_latencies", klen) == 0)
        o->summaries = strcmp(v, "true") == 0;
    else if (klen == 17 && memcmp(arg, "counter_latencies", klen) == 0)
        o->counters = strcmp(v, "false") != 0;
    else if (klen == 17 && memcmp(arg, "summary_quantiles", klen) == 0)
        o->quantiles = v;
    /* anything else (histogram_latencies is not in 2.51) is ignored, as Triton does */
    return NULL;
}

static const nr_metrics_quantile_t default_quantiles[] = {
    {0.5, 0.05}, {0.9, 0.01}, {0.95, 0.001}, {0.99, 0.001}, {0.999, 0.001},
};

/* std::stod on one side of a pair: a number at the start (leading blanks and
 * trailing text allowed), else false. */
static bool stod(const char *s, size_t n, double *out)
{
    char buf[64];
    if (n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    *out = strtod(buf, &end);
    return end != buf && errno != ERANGE;
}

nr_metrics_quantile_t *nr_metrics_parse_quantiles(const char *text, size_t *n)
{
    size_t cap = 1;
    for (const char *p = text; p && *p; p++)
        cap += *p == ',';
    nr_metrics_quantile_t *q = nr_calloc(cap + 5, sizeof(*q));
    *n = 0;
    for (const char *p = text; p != NULL;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        double qv, ev;
        if (colon == NULL) {
            NR_LOG_ERROR("Invalid option: [%.*s]. No ':' delimiter found. Expected format is "
                         "<quantile>:<error>",
                         (int)len, p);
        } else if (!stod(p, (size_t)(colon - p), &qv) ||
                   !stod(colon + 1, len - (size_t)(colon - p) - 1, &ev)) {
            NR_LOG_ERROR("Invalid option: [%.*s]. Error: stod", (int)len, p);
        } else {
            q[*n].q = qv;
            q[*n].err = ev;
            (*n)++;
        }
        p = end && end[1] ? end + 1 : NULL; /* getline: no empty pair after a last ',' */
    }
    if (*n == 0) {
        memcpy(q, default_quantiles, sizeof(default_quantiles));
        *n = sizeof(default_quantiles) / sizeof(default_quantiles[0]);
    }
    return q;
}
