/* perf_metrics.c - --collect-metrics (perf.h): the server's Prometheus endpoint polled every
 * --metrics-interval while a window runs, and the four GPU series perf_analyzer reports, per
 * gpu_uuid: nv_gpu_utilization (averaged), nv_gpu_power_usage (averaged),
 * nv_gpu_memory_used_bytes (the maximum) and nv_gpu_memory_total_bytes (the first value). A
 * server without GPUs has none of them: the blocks and CSV cells are then empty, as
 * perf_analyzer leaves them, after its "Unable to parse" warnings.
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_names[4] = {"nv_gpu_utilization", "nv_gpu_power_usage",
                                       "nv_gpu_memory_used_bytes", "nv_gpu_memory_total_bytes"};

nr_status_t *perf_metrics_init(perf_metrics_t *mt, const perf_opts_t *o)
{
    memset(mt, 0, sizeof(*mt));
    char *url;
    if (o->metrics_url) {
        url = nr_strdup(o->metrics_url);
    } else { /* localhost:8002/metrics, on -u's host */
        const char *u = strncmp(o->url, "http://", 7) == 0 ? o->url + 7 : o->url;
        const char *colon = strrchr(u, ':');
        url = nr_asprintf("%.*s:8002/metrics", (int)(colon ? colon - u : (long)strlen(u)), u);
    }
    char *hostport = strncmp(url, "http://", 7) == 0 ? url + 7 : url;
    char *slash = strchr(hostport, '/');
    mt->path = nr_strdup(slash ? slash : "/metrics");
    if (slash)
        *slash = '\0';
    nr_status_t *st = perf_conn_init(&mt->conn, hostport);
    free(url);
    return st;
}

void perf_metrics_close(perf_metrics_t *mt)
{
    perf_conn_close(&mt->conn);
    free(mt->path);
    mt->path = NULL;
}

static perf_gpu_t *gpu(perf_gpus_t *g, const char *uuid, size_t n)
{
    for (size_t i = 0; i < g->n; i++)
        if (strncmp(g->gpu[i].uuid, uuid, n) == 0 && g->gpu[i].uuid[n] == '\0')
            return &g->gpu[i];
    if (g->n == PERF_MAX_GPUS || n >= sizeof(g->gpu[0].uuid))
        return NULL;
    perf_gpu_t *x = &g->gpu[g->n++];
    memset(x, 0, sizeof(*x));
    memcpy(x->uuid, uuid, n);
    return x;
}

void perf_metrics_poll(perf_metrics_t *mt, perf_gpus_t *acc)
{
    char *text = NULL;
    size_t len = 0;
    nr_status_t *st = perf_get_body(&mt->conn, mt->path, &text, &len);
    bool seen[4] = {false};
    if (st == NULL) {
        for (char *line = text, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            for (int k = 0; k < 4; k++) {
                size_t nl = strlen(g_names[k]);
                char *u;
                if (strncmp(line, g_names[k], nl) != 0 || (line[nl] != '{' && line[nl] != ' ') ||
                    (u = strstr(line, "gpu_uuid=\"")) == NULL)
                    continue;
                u += 10;
                char *end = strchr(u, '"'), *val = strrchr(line, ' ');
                perf_gpu_t *g = end && val ? gpu(acc, u, (size_t)(end - u)) : NULL;
                if (g == NULL)
                    continue;
                double v = strtod(val + 1, NULL);
                seen[k] = true;
                if (k == 0)
                    g->util_sum += v, g->util_n++;
                else if (k == 1)
                    g->power_sum += v, g->power_n++;
                else if (k == 2)
                    g->mem_used = v > g->mem_used ? v : g->mem_used;
                else if (g->mem_total == 0)
                    g->mem_total = v;
            }
        }
    }
    nr_status_free(st);
    free(text);
    for (int k = 0; k < 4 && !mt->warned; k++)
        if (!seen[k])
            fprintf(stderr, "WARNING: Unable to parse '%s' metric.\n", g_names[k]);
    mt->warned = true;
}

void perf_gpus_merge(perf_gpus_t *into, const perf_gpus_t *from)
{
    for (size_t i = 0; i < from->n; i++) {
        const perf_gpu_t *f = &from->gpu[i];
        perf_gpu_t *g = gpu(into, f->uuid, strlen(f->uuid));
        if (g == NULL)
            continue;
        g->util_sum += f->util_sum, g->util_n += f->util_n;
        g->power_sum += f->power_sum, g->power_n += f->power_n;
        g->mem_used = f->mem_used > g->mem_used ? f->mem_used : g->mem_used;
        if (g->mem_total == 0)
            g->mem_total = f->mem_total;
    }
}
