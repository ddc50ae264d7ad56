/* perf_stats.c - server statistics as perf_analyzer reads them (perf.h;
 * ../shared/spec/perf_tools.md, A2 "Server stats").
 *
 * A snapshot is what the statistics extension listed at one moment, one entry per model
 * version; a window's figures are the difference of the snapshots taken before and after it.
 * For an ensemble (platform "ensemble") perf_analyzer also reports its composing models: at
 * start it maps each ensemble to its steps' models (step model_version -1 kept as "", any
 * version), following steps that are ensembles themselves, and then reads every model's
 * statistics, not the ensemble's alone. A step without a version is reported for the highest
 * version whose queue count grew over the window, and perf_analyzer warns when several did
 * (an ensemble whose steps name version 1 and -1 of the same model always does). The
 * composing models of one ensemble are listed in (name, version) order, a std::map's.
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_STATS (sizeof(perf_server_stats_t) / sizeof(uint64_t)) /* all uint64_t */

/* Nested ensembles deeper than this are not followed (a server that lists a cycle would send
 * perf_analyzer round it forever). */
#define MAX_DEPTH 32

void perf_stats_add(perf_server_stats_t *a, const perf_server_stats_t *b)
{
    uint64_t v[N_STATS], w[N_STATS];
    memcpy(v, a, sizeof(v));
    memcpy(w, b, sizeof(w));
    for (size_t i = 0; i < N_STATS; i++)
        v[i] += w[i];
    memcpy(a, v, sizeof(v));
}

void perf_stats_diff(perf_server_stats_t *d, const perf_server_stats_t *now,
                     const perf_server_stats_t *prev)
{
    uint64_t v[N_STATS], w[N_STATS];
    memcpy(v, now, sizeof(v));
    memcpy(w, prev, sizeof(w));
    for (size_t i = 0; i < N_STATS; i++)
        v[i] -= w[i];
    memcpy(d, v, sizeof(v));
}

/* ---- snapshots ---- */

perf_stats_entry_t *perf_snapshot_add(perf_snapshot_t *snap, const char *name, size_t name_len,
                                      const char *version, size_t version_len)
{
    snap->e = nr_realloc(snap->e, (snap->n + 1) * sizeof(*snap->e));
    perf_stats_entry_t *e = &snap->e[snap->n++];
    memset(e, 0, sizeof(*e));
    e->name = nr_strndup(name, name_len);
    e->version = nr_strndup(version, version_len);
    return e;
}

void perf_snapshot_free(perf_snapshot_t *snap)
{
    for (size_t i = 0; i < snap->n; i++) {
        free(snap->e[i].name);
        free(snap->e[i].version);
    }
    free(snap->e);
    memset(snap, 0, sizeof(*snap));
}

static const perf_stats_entry_t *find(const perf_snapshot_t *snap, const char *name,
                                      const char *version)
{
    for (size_t i = 0; snap && i < snap->n; i++)
        if (strcmp(snap->e[i].name, name) == 0 && strcmp(snap->e[i].version, version) == 0)
            return &snap->e[i];
    return NULL;
}

/* ---- the composing-model map ---- */

void perf_config_free(perf_config_t *c)
{
    for (size_t i = 0; i < c->n_steps; i++)
        free(c->step_models[i]);
    free(c->step_models);
    free(c->step_versions);
    free(c->name);
    memset(c, 0, sizeof(*c));
}

static int cmp_edge(const perf_edge_t *a, const char *parent, const char *name,
                    const char *version)
{
    int c = strcmp(a->parent, parent);
    if (c == 0)
        c = strcmp(a->name, name);
    return c ? c : strcmp(a->version, version);
}

/* Adds (parent, name, version) to m->edges, kept sorted and each once (perf_analyzer's map of
 * sets); false when it was there already. */
static bool add_edge(perf_model_t *m, const char *parent, const char *name, const char *version)
{
    size_t at = 0;
    while (at < m->n_edges && cmp_edge(&m->edges[at], parent, name, version) < 0)
        at++;
    if (at < m->n_edges && cmp_edge(&m->edges[at], parent, name, version) == 0)
        return false;
    m->edges = nr_realloc(m->edges, (m->n_edges + 1) * sizeof(*m->edges));
    memmove(&m->edges[at + 1], &m->edges[at], (m->n_edges - at) * sizeof(*m->edges));
    m->edges[at] = (perf_edge_t){nr_strdup(parent), nr_strdup(name), nr_strdup(version)};
    m->n_edges++;
    return true;
}

typedef struct {
    perf_config_fn fetch;
    void *ctx;
    char **seen; /* "<name>\n<version>" of every config fetched */
    size_t n_seen;
} walk_t;

static nr_status_t *walk(perf_model_t *m, walk_t *wk, const perf_config_t *cfg, int depth)
{
    if (!cfg->ensemble || depth > MAX_DEPTH)
        return NULL;
    nr_status_t *st = NULL;
    for (size_t i = 0; i < cfg->n_steps && st == NULL; i++) {
        char version[32] = "";
        if (cfg->step_versions[i] != -1)
            snprintf(version, sizeof(version), "%lld", (long long)cfg->step_versions[i]);
        add_edge(m, cfg->name, cfg->step_models[i], version);
        /* perf_analyzer reads every step model's config (an error if it cannot); the same
         * model and version gives the same steps, so each is read once */
        char *key = nr_asprintf("%s\n%s", cfg->step_models[i], version);
        bool seen = false;
        for (size_t k = 0; k < wk->n_seen && !seen; k++)
            seen = strcmp(wk->seen[k], key) == 0;
        if (seen) {
            free(key);
            continue;
        }
        wk->seen = nr_realloc(wk->seen, (wk->n_seen + 1) * sizeof(*wk->seen));
        wk->seen[wk->n_seen++] = key;
        perf_config_t sub = {0};
        st = wk->fetch(wk->ctx, cfg->step_models[i], version, &sub);
        if (st == NULL)
            st = walk(m, wk, &sub, depth + 1);
        perf_config_free(&sub);
    }
    return st;
}

nr_status_t *perf_composing_load(perf_model_t *m, const perf_config_t *top,
                                 perf_config_fn fetch, void *ctx)
{
    walk_t wk = {.fetch = fetch, .ctx = ctx};
    nr_status_t *st = walk(m, &wk, top, 0);
    for (size_t i = 0; i < wk.n_seen; i++)
        free(wk.seen[i]);
    free(wk.seen);
    return st;
}

/* ---- a window's figures ---- */

void perf_comp_free(perf_comp_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(c[i].name);
        free(c[i].version);
    }
    free(c);
}

/* One window's summary in the making: the snapshots around it, the composing models so far. */
typedef struct {
    const perf_model_t *m;
    const perf_snapshot_t *prev, *now;
    perf_comp_t *comp;
    size_t n;
} sum_t;

/* The version of `name` a composing model's statistics are read from, as perf_analyzer's
 * DetermineStatsModelVersion: the given one if the server lists it; for "" the highest
 * version whose queue count grew (a warning when more than one did). -1: none. */
static long long stats_version(const sum_t *s, const char *name, const char *version)
{
    if (*version)
        return find(s->now, name, version) ? strtoll(version, NULL, 10) : -1;
    long long best = -1;
    bool several = false;
    for (size_t i = 0; i < s->now->n; i++) {
        const perf_stats_entry_t *e = &s->now->e[i];
        if (strcmp(e->name, name) != 0)
            continue;
        const perf_stats_entry_t *p = find(s->prev, e->name, e->version);
        if (e->s.queue_count <= (p ? p->s.queue_count : 0))
            continue;
        long long v = strtoll(e->version, NULL, 10);
        several |= best != -1;
        best = v > best ? v : best;
    }
    if (several)
        fprintf(stderr, "WARNING: Multiple versions of model %s are loaded in the triton "
                "server, and the version to use was unspecified. The stats for that model may "
                "be inaccurate.\n", name);
    return best;
}

/* now - prev of (name, version); zero when the server does not list it. */
static void delta(const sum_t *s, const char *name, const char *version, perf_server_stats_t *d)
{
    const perf_stats_entry_t *now = find(s->now, name, version);
    const perf_stats_entry_t *prev = find(s->prev, name, version);
    perf_server_stats_t zero = {0};
    if (now == NULL)
        *d = zero;
    else
        perf_stats_diff(d, &now->s, prev ? &prev->s : &zero);
}

static int cmp_comp(const void *a, const void *b)
{
    const perf_comp_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->version, y->version);
}

/* Appends the composing models of ensemble `parent` to s->comp, each followed by its own. */
static nr_status_t *summarize(sum_t *s, const char *parent, int depth)
{
    if (depth > MAX_DEPTH)
        return NULL;
    perf_comp_t *kids = NULL;
    size_t n = 0;
    nr_status_t *st = NULL;
    for (size_t i = 0; i < s->m->n_edges && st == NULL; i++) {
        const perf_edge_t *e = &s->m->edges[i];
        if (strcmp(e->parent, parent) != 0)
            continue;
        long long v = stats_version(s, e->name, e->version);
        if (v == -1) {
            st = nr_status_new(NR_NOT_FOUND, "failed to find the requested model version");
            break;
        }
        char version[32];
        snprintf(version, sizeof(version), "%lld", v);
        bool dup = false; /* two steps that resolve to the same version are one entry */
        for (size_t k = 0; k < n && !dup; k++)
            dup = strcmp(kids[k].name, e->name) == 0 && strcmp(kids[k].version, version) == 0;
        if (dup)
            continue;
        kids = nr_realloc(kids, (n + 1) * sizeof(*kids));
        kids[n++] = (perf_comp_t){.name = nr_strdup(e->name), .version = nr_strdup(version)};
    }
    if (n)
        qsort(kids, n, sizeof(*kids), cmp_comp);
    for (size_t k = 0; k < n && st == NULL; k++) {
        s->comp = nr_realloc(s->comp, (s->n + 1) * sizeof(*s->comp));
        size_t at = s->n++;
        s->comp[at] = kids[k];
        kids[k].name = kids[k].version = NULL; /* moved */
        delta(s, s->comp[at].name, s->comp[at].version, &s->comp[at].s);
        st = summarize(s, s->comp[at].name, depth + 1);
        s->comp[at].n_desc = s->n - at - 1;
    }
    perf_comp_free(kids, n);
    return st;
}

nr_status_t *perf_stats_window(const perf_opts_t *o, const perf_model_t *m,
                               const perf_snapshot_t *prev, const perf_snapshot_t *now,
                               perf_window_t *w)
{
    /* -m itself: -x's version, else the highest listed (requests without a version go to the
     * highest version served, the one perf_analyzer finds by its grown counts) */
    const char *version = o->version;
    long long best = -1;
    for (size_t i = 0; version == NULL && i < now->n; i++) {
        long long v = strtoll(now->e[i].version, NULL, 10);
        if (strcmp(now->e[i].name, o->model) == 0 && v > best)
            best = v;
    }
    char buf[32];
    if (version == NULL) {
        snprintf(buf, sizeof(buf), "%lld", best);
        version = buf;
    }
    sum_t s = {.m = m, .prev = prev, .now = now};
    delta(&s, o->model, version, &w->server);
    w->have_server = true;
    nr_status_t *st = m->n_edges ? summarize(&s, o->model, 0) : NULL;
    perf_comp_free(w->comp, w->n_comp);
    w->comp = s.comp;
    w->n_comp = s.n;
    return st;
}

void perf_comp_merge(perf_window_t *into, const perf_window_t *from)
{
    if (from->n_comp == 0)
        return;
    if (into->n_comp == 0) {
        perf_comp_free(into->comp, 0);
        into->comp = nr_calloc(from->n_comp, sizeof(*into->comp));
        for (size_t i = 0; i < from->n_comp; i++) {
            into->comp[i] = from->comp[i];
            into->comp[i].name = nr_strdup(from->comp[i].name);
            into->comp[i].version = nr_strdup(from->comp[i].version);
        }
        into->n_comp = from->n_comp;
        return;
    }
    /* the same tree in every window but where a version changed in between: perf_analyzer
     * then adds nothing for the models the first window does not list */
    for (size_t i = 0; i < into->n_comp && i < from->n_comp; i++)
        if (into->comp[i].n_desc == from->comp[i].n_desc &&
            cmp_comp(&into->comp[i], &from->comp[i]) == 0)
            perf_stats_add(&into->comp[i].s, &from->comp[i].s);
}
