/* analyzer_multi.c - models profiled together (analyzer.h):
 * --run-config-profile-models-concurrently-enable.
 *
 * Each model has first been profiled alone; its candidates are its best variants alone (at
 * most --num-configs-per-model) and its default. A combination takes one candidate per model;
 * it is measured with every model loaded into one fresh server and all of them under load at
 * once (az_run_together: at each concurrency level every model has that many requests in
 * flight, over the same windows), so each model's throughput and p99 are what it gets beside
 * the others and the memory is the server's with all of them. A level satisfies the
 * constraints when every model's measurement does (--latency-budget and --min-throughput per
 * model, --max-memory on the server's peak); two levels compare by the mean over the models
 * of their weighted relative gains (Model Analyzer's fairness: a combination that balances
 * the models can beat one with more throughput in total). Brute measures every combination;
 * quick climbs from every model's best alone, one model's candidate at a time, as Model
 * Analyzer's quick search climbs. The all-defaults combination is measured first, as the
 * baseline of the sentence. A checkpoint (models-together.ckpt) keeps every combination
 * measured, so an interrupted profile resumes. Outputs: results/metrics-models-together.csv,
 * results/models-together.json and its report (reports/summaries/models-together/), and each
 * model's candidate in the best combination written as <model>/ in the output repository.
 */
#include "analyzer.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One combination: a candidate per model, and each model's run when measured together. */
typedef struct {
    size_t *pick;
    az_run_t *runs;
    ssize_t level; /* the best level under the constraints; -1: none */
} combo_t;

typedef struct {
    const az_opts_t *o;
    az_server_t *s;
    const az_cands_t *c;
    size_t n;       /* models */
    char **models;
    combo_t *combos;
    size_t nc, cap;
    size_t planned, measured, points;
    double started;
    bool down;      /* the server ended and could not be started again */
    az_results_t *saved; /* the checkpoint's combinations, one az_results_t per model */
    size_t n_saved;
} together_t;

static double now_s(void)
{
    return (double)perf_now_ns() / 1e9;
}

static bool level_ok(const together_t *t, const combo_t *k, size_t l)
{
    for (size_t i = 0; i < t->n; i++)
        if (k->runs[i].error || l >= k->runs[i].n_pts ||
            !az_satisfies(t->o, &k->runs[i], &k->runs[i].pts[l]))
            return false;
    return true;
}

/* >0 when level la of a is better than level lb of b: the mean over the models. */
static double compare(const together_t *t, const combo_t *a, size_t la, const combo_t *b,
                      size_t lb)
{
    double g = 0;
    for (size_t i = 0; i < t->n; i++)
        g += az_compare(t->o, &a->runs[i], &a->runs[i].pts[la], &b->runs[i],
                        &b->runs[i].pts[lb]);
    return g / (double)t->n;
}

static ssize_t best_level(const together_t *t, const combo_t *k)
{
    ssize_t best = -1;
    size_t levels = k->runs[0].n_pts;
    for (size_t l = 0; l < levels; l++)
        if (level_ok(t, k, l) && (best < 0 || compare(t, k, l, k, (size_t)best) > 0))
            best = (ssize_t)l;
    return best;
}

static bool better(const together_t *t, const combo_t *a, const combo_t *b)
{
    if (a->level < 0 || b->level < 0)
        return a->level >= 0;
    return compare(t, a, (size_t)a->level, b, (size_t)b->level) > 0;
}

/* "inception_onnx_config_2 + densenet_onnx_config_default" */
static void names(const together_t *t, const size_t *pick, char *out, size_t len)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < t->n && k < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%s%s", i ? " + " : "",
                              t->c[i].vs[pick[i]].name);
}

static void progress(together_t *t, const size_t *pick)
{
    char desc[1024];
    names(t, pick, desc, sizeof(desc));
    size_t done = t->nc + 1, all = t->planned > done ? t->planned : done;
    double spent = now_s() - t->started;
    if (t->measured > 0)
        fprintf(stderr, "nereid-analyzer: together [%zu/%zu] %s; about %.0f s left\n", done,
                all, desc, spent / (double)t->measured * (double)(all - done + 1));
    else
        fprintf(stderr, "nereid-analyzer: together [%zu/%zu] %s\n", done, all, desc);
}

/* The checkpoint's combinations, when it holds these models in this order. */
static void load_checkpoint(together_t *t)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/" AZ_TOGETHER ".ckpt", t->o->checkpoint_dir);
    if (access(path, F_OK) != 0)
        return;
    nr_status_t *st = az_together_load(path, &t->saved, &t->n_saved);
    for (size_t i = 0; st == NULL && i < t->n; i++)
        if (t->n_saved != t->n || strcmp(t->saved[i].model, t->models[i]) != 0)
            st = nr_status_new(NR_INVALID_ARG, "%s holds other models", path);
    if (st == NULL) {
        fprintf(stderr, "nereid-analyzer: together: resuming from %s (%zu combinations "
                "measured)\n", path, t->saved[0].n);
        return;
    }
    fprintf(stderr, "nereid-analyzer: ignoring the checkpoint: %s\n", st->msg);
    nr_status_free(st);
    for (size_t i = 0; i < t->n_saved; i++)
        az_results_free(&t->saved[i]);
    free(t->saved);
    t->saved = NULL;
    t->n_saved = 0;
}

/* The checkpoint's run of the combination pick, moved into runs; false when it has none. */
static bool from_checkpoint(together_t *t, const size_t *pick, az_run_t *runs)
{
    for (size_t k = 0; t->n_saved && k < t->saved[0].n; k++) {
        bool same = true;
        for (size_t i = 0; i < t->n && same; i++) {
            const az_saved_run_t *sv = &t->saved[i].runs[k];
            const az_variant_t *v = &t->c[i].vs[pick[i]];
            same = sv->config && sv->is_default == v->is_default &&
                   strcmp(sv->config, v->config_json) == 0;
        }
        if (!same)
            continue;
        for (size_t i = 0; i < t->n; i++) {
            az_saved_run_t *sv = &t->saved[i].runs[k];
            runs[i] = sv->run; /* moved */
            runs[i].variant = pick[i];
            memset(&sv->run, 0, sizeof(sv->run));
            free(sv->config);
            sv->config = NULL;
        }
        return true;
    }
    return false;
}

/* The checkpoint (results false) or the results file, with every combination so far. */
static nr_status_t *save(const together_t *t, bool results, ssize_t best, const char *why,
                         char *path, size_t len)
{
    az_run_t **runs = nr_calloc(t->nc + 1, sizeof(*runs));
    for (size_t k = 0; k < t->nc; k++)
        runs[k] = t->combos[k].runs;
    uint64_t conc = 0;
    if (best >= 0)
        conc = t->combos[best].runs[0].pts[t->combos[best].level].concurrency;
    nr_status_t *st = az_together_save(t->o, results, t->c, t->n, runs, t->nc, best, conc, why,
                                       path, len);
    free(runs);
    return st;
}

/* The combination pick, measured now unless it was already (in this run or the checkpoint). */
static size_t measure(together_t *t, const size_t *pick)
{
    for (size_t k = 0; k < t->nc; k++)
        if (memcmp(t->combos[k].pick, pick, t->n * sizeof(*pick)) == 0)
            return k;
    if (t->nc == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 8;
        t->combos = nr_realloc(t->combos, t->cap * sizeof(*t->combos));
    }
    combo_t *k = &t->combos[t->nc];
    k->pick = nr_malloc(t->n * sizeof(*pick));
    memcpy(k->pick, pick, t->n * sizeof(*pick));
    k->runs = nr_calloc(t->n, sizeof(*k->runs));
    if (from_checkpoint(t, pick, k->runs)) {
        k->level = best_level(t, k);
        for (size_t i = 0; i < t->n; i++)
            t->points += k->runs[i].n_pts;
        return t->nc++;
    }
    const az_variant_t **vs = nr_calloc(t->n, sizeof(*vs));
    for (size_t i = 0; i < t->n; i++) {
        vs[i] = &t->c[i].vs[pick[i]];
        k->runs[i].variant = pick[i];
    }
    if (!t->down && !az_server_fresh(t->s, t->o))
        t->down = true;
    progress(t, pick);
    if (t->down) {
        for (size_t i = 0; i < t->n; i++) {
            k->runs[i].load_mb = -1;
            k->runs[i].error = nr_strdup("not measured: the server could not be restarted");
        }
    } else {
        az_run_together(t->o, t->s, t->models, vs, t->n, t->o->min_conc, t->o->max_conc,
                        k->runs);
        char *error = k->runs[0].error ? nr_strdup(k->runs[0].error) : NULL;
        if (az_server_check(t->s, t->o, "the models together", &error, &t->down))
            for (size_t i = 0; i < t->n; i++) {
                free(k->runs[i].error);
                k->runs[i].error = nr_strdup(error);
            }
        free(error);
    }
    free(vs);
    if (k->runs[0].error)
        fprintf(stderr, "nereid-analyzer: together: %s\n", k->runs[0].error);
    k->level = best_level(t, k);
    for (size_t i = 0; i < t->n; i++)
        t->points += k->runs[i].n_pts;
    t->measured++;
    t->nc++;
    char path[4096];
    nr_status_t *st = save(t, false, -1, "", path, sizeof(path));
    if (st) {
        fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
        nr_status_free(st);
    }
    return t->nc - 1;
}

/* Every combination, the all-defaults one first (an odometer over the candidate lists). */
static void brute(together_t *t, const size_t *defaults)
{
    size_t *pick = nr_calloc(t->n, sizeof(*pick));
    t->planned = 1;
    for (size_t i = 0; i < t->n; i++)
        t->planned *= t->c[i].n;
    measure(t, defaults);
    for (;;) {
        measure(t, pick);
        size_t i = 0;
        while (i < t->n && ++pick[i] == t->c[i].n)
            pick[i++] = 0;
        if (i == t->n)
            break;
    }
    free(pick);
}

/* From every model's best alone, the best neighbour (one model moved to its next or previous
 * candidate) while one is better. */
static void quick(together_t *t, const size_t *defaults)
{
    size_t *cur = nr_calloc(t->n, sizeof(*cur)), *next = nr_calloc(t->n, sizeof(*next));
    t->planned = 2 + 2 * t->n;
    measure(t, defaults);
    size_t at = measure(t, cur);
    for (;;) {
        size_t best = at;
        for (size_t i = 0; i < t->n; i++)
            for (int d = -1; d <= 1; d += 2) {
                if ((d < 0 && cur[i] == 0) || (d > 0 && cur[i] + 1 >= t->c[i].n))
                    continue;
                memcpy(next, cur, t->n * sizeof(*cur));
                next[i] += (size_t)(ssize_t)d;
                t->planned = t->nc + 2 * t->n > t->planned ? t->nc + 2 * t->n : t->planned;
                size_t k = measure(t, next);
                if (better(t, &t->combos[k], &t->combos[best]))
                    best = k;
            }
        if (best == at)
            break;
        at = best;
        memcpy(cur, t->combos[at].pick, t->n * sizeof(*cur));
    }
    free(next);
    free(cur);
}

/* One sentence: the best combination against the all-defaults one. */
static void explain(const together_t *t, ssize_t best, const combo_t *base, char *out,
                    size_t len)
{
    if (best < 0) {
        snprintf(out, len, "No combination met the constraints%s.",
                 t->o->latency_budget_ms > 0 || t->o->min_throughput > 0 ||
                 t->o->max_memory_mb > 0 ? "" : " (none given; every combination failed)");
        return;
    }
    const combo_t *k = &t->combos[best];
    nr_buf_t b;
    nr_buf_init(&b);
    for (size_t i = 0; i < t->n; i++) {
        const az_variant_t *v = &t->c[i].vs[k->pick[i]];
        const az_point_t *p = &k->runs[i].pts[k->level];
        char desc[256];
        az_variant_describe(v, desc, sizeof(desc));
        nr_buf_printf(&b, "%s%s (%s): %.0f infer/sec, p99 %.2f ms", i ? "; " : "", v->name,
                      desc, p->throughput, p->p99_ms);
        if (base && base != k && base->level >= 0) {
            const az_point_t *d = &base->runs[i].pts[base->level];
            if (d->throughput > 0)
                nr_buf_printf(&b, " (%.2fx the default's throughput beside the others' "
                              "defaults)", p->throughput / d->throughput);
        }
    }
    const az_point_t *p0 = &k->runs[0].pts[k->level];
    nr_buf_printf(&b, ", at concurrency %llu each, served together", (unsigned long long)
                  p0->concurrency);
    if (k->runs[0].load_mb >= 0)
        nr_buf_printf(&b, "; %.0f MB loaded", k->runs[0].load_mb);
    nr_buf_printf(&b, ", peak %.0f MB", p0->mem_mb);
    if (base == k)
        nr_buf_printf(&b, "; the defaults together beat every combination measured");
    else if (base == NULL || base->level < 0)
        nr_buf_printf(&b, "; the defaults together met no constraint");
    if (t->o->latency_budget_ms > 0)
        nr_buf_printf(&b, "; every p99 under the %g ms budget", t->o->latency_budget_ms);
    if (t->o->min_throughput > 0)
        nr_buf_printf(&b, "; each at least %g infer/sec", t->o->min_throughput);
    if (t->o->max_memory_mb > 0)
        nr_buf_printf(&b, "; at most %g MB", t->o->max_memory_mb);
    snprintf(out, len, "%s.", b.data ? b.data : "");
    nr_buf_free(&b);
}

/* The CSV, the best combination's configs, the results file and the report (its path into
 * report). */
static nr_status_t *write_outputs(const together_t *t, ssize_t best, const char *why,
                                  char *report, size_t len)
{
    nr_status_t *st = NULL;
    for (size_t k = 0; k < t->nc && st == NULL; k++)
        for (size_t i = 0; i < t->n && st == NULL; i++) {
            char prefix[32];
            snprintf(prefix, sizeof(prefix), "%zu,", k);
            st = az_write_csv_rows(t->o, "metrics-models-together.csv", "Combination,", prefix,
                                   t->models[i], t->c[i].vs, &t->combos[k].runs[i], 1,
                                   k == 0 && i == 0);
        }
    for (size_t i = 0; best >= 0 && i < t->n && st == NULL; i++)
        st = az_variant_write(t->o, t->models[i], &t->c[i].vs[t->combos[best].pick[i]],
                              t->o->out_repo, t->models[i]);
    char path[4096];
    if (st == NULL)
        st = save(t, true, best, why, path, sizeof(path));
    az_results_t *pm = NULL;
    size_t n = 0;
    if (st == NULL && (st = az_together_load(path, &pm, &n)) == NULL)
        st = az_report_together(t->o->export_path, pm, n, report, len);
    for (size_t i = 0; i < n; i++)
        az_results_free(&pm[i]);
    free(pm);
    return st;
}

bool az_profile_together(const az_opts_t *o, az_server_t *s, const az_cands_t *c, size_t n)
{
    together_t t = {.o = o, .s = s, .c = c, .n = n, .started = now_s()};
    size_t *defaults = nr_calloc(n, sizeof(*defaults));
    t.models = nr_calloc(n, sizeof(*t.models));
    for (size_t i = 0; i < n; i++) {
        t.models[i] = (char *)c[i].model;
        while (defaults[i] < c[i].n && !c[i].vs[defaults[i]].is_default)
            defaults[i]++;
        if (defaults[i] == c[i].n) /* its default failed alone: the best alone instead */
            defaults[i] = 0;
    }
    load_checkpoint(&t);
    if (o->quick)
        quick(&t, defaults);
    else
        brute(&t, defaults);
    ssize_t best = -1;
    for (size_t k = 0; k < t.nc; k++)
        if (t.combos[k].level >= 0 && (best < 0 || better(&t, &t.combos[k], &t.combos[best])))
            best = (ssize_t)k;
    const combo_t *base = t.nc ? &t.combos[0] : NULL;
    char why[4096], report[4096] = "";
    explain(&t, best, base, why, sizeof(why));
    nr_status_t *st = write_outputs(&t, best, why, report, sizeof(report));
    if (st) {
        fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
        nr_status_free(st);
        report[0] = '\0';
    }
    printf("together: %zu combinations (%zu measured now), %zu measurements in %.0f s\n", t.nc,
           t.measured, t.points, now_s() - t.started);
    printf("together: best: %s\n", why);
    if (best >= 0)
        for (size_t i = 0; i < n; i++)
            printf("together: %s written as %s/%s/config.pbtxt (%s)\n", c[i].model, o->out_repo,
                   c[i].model, c[i].vs[t.combos[best].pick[i]].name);
    if (*report)
        printf("together: report: %s\n", report);
    fflush(stdout);
    bool ok = st == NULL && best >= 0;
    for (size_t k = 0; k < t.nc; k++) {
        for (size_t i = 0; i < n; i++)
            az_run_free(&t.combos[k].runs[i]);
        free(t.combos[k].runs);
        free(t.combos[k].pick);
    }
    free(t.combos);
    for (size_t i = 0; i < t.n_saved; i++)
        az_results_free(&t.saved[i]);
    free(t.saved);
    free(t.models);
    free(defaults);
    return ok;
}
