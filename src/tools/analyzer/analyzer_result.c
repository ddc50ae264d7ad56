/* analyzer_result.c - the choice and the records (analyzer.h).
 *
 * Constraints as Model Analyzer has them: p99 latency (--latency-budget, ms), throughput
 * (--min-throughput) and memory (--max-memory, MB: the server process's peak resident memory
 * during the measurement, where Model Analyzer limits GPU memory). Objectives compare two
 * measurements by the weighted mean of their relative gains (throughput up, p99 latency and
 * memory down), Model Analyzer's rule; the best run is the one whose best measurement under
 * the constraints wins. The CSV has Model Analyzer's columns first, then nereid's; the
 * checkpoint is JSON, one entry per finished run, matched to a variant by its config.
 */
#include "analyzer.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"
#include "../../common/json.h"
#include "../../config/model_config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool az_satisfies(const az_opts_t *o, const az_run_t *r, const az_point_t *p)
{
    if (o->latency_budget_ms > 0 && p->p99_ms > o->latency_budget_ms)
        return false;
    if (o->min_throughput > 0 && p->throughput < o->min_throughput)
        return false;
    if (o->max_memory_mb > 0 && p->mem_mb > o->max_memory_mb)
        return false;
    return true;
}

/* (a - b) relative to their mean: symmetric, and 0 when both are 0. */
static double gain(double a, double b)
{
    double m = (a + b) / 2;
    return m > 0 ? (a - b) / m : 0;
}

double az_compare(const az_opts_t *o, const az_run_t *ra, const az_point_t *a,
                  const az_run_t *rb, const az_point_t *b)
{
    double w = o->w_throughput + o->w_latency + o->w_memory;
    if (w <= 0)
        return 0;
    double g = o->w_throughput * gain(a->throughput, b->throughput) +
               o->w_latency * gain(b->p99_ms, a->p99_ms) +
               o->w_memory * gain(b->mem_mb, a->mem_mb);
    return g / w;
}

const az_point_t *az_best_point(const az_opts_t *o, const az_run_t *r)
{
    const az_point_t *best = NULL;
    for (size_t i = 0; r->error == NULL && i < r->n_pts; i++)
        if (az_satisfies(o, r, &r->pts[i]) &&
            (best == NULL || az_compare(o, r, &r->pts[i], r, best) > 0))
            best = &r->pts[i];
    return best;
}

ssize_t az_best_run(const az_opts_t *o, const az_run_t *runs, size_t n)
{
    ssize_t best = -1;
    const az_point_t *bp = NULL;
    for (size_t i = 0; i < n; i++) {
        const az_point_t *p = az_best_point(o, &runs[i]);
        if (p && (bp == NULL || az_compare(o, &runs[i], p, &runs[best], bp) > 0)) {
            best = (ssize_t)i;
            bp = p;
        }
    }
    return best;
}

/* The constraints in words, for the sentence ("" without any). */
static void constraints_text(const az_opts_t *o, char *out, size_t len)
{
    int k = 0;
    out[0] = '\0';
    if (o->latency_budget_ms > 0)
        k += snprintf(out + k, len - (size_t)k, "%sp99 under the %g ms budget", k ? ", " : "",
                      o->latency_budget_ms);
    if (o->min_throughput > 0 && (size_t)k < len)
        k += snprintf(out + k, len - (size_t)k, "%sat least %g infer/sec", k ? ", " : "",
                      o->min_throughput);
    if (o->max_memory_mb > 0 && (size_t)k < len)
        snprintf(out + k, len - (size_t)k, "%sat most %g MB", k ? ", " : "", o->max_memory_mb);
}

void az_explain(const az_opts_t *o, const az_variant_t *vs, const az_run_t *runs, size_t n,
                ssize_t best, char *out, size_t len)
{
    char cons[256], desc[256];
    constraints_text(o, cons, sizeof(cons));
    if (best < 0) {
        snprintf(out, len, "No configuration met the constraints (%s).",
                 cons[0] ? cons : "none given; every run failed");
        return;
    }
    const az_run_t *r = &runs[best];
    const az_point_t *p = az_best_point(o, r);
    az_variant_describe(&vs[r->variant], desc, sizeof(desc));
    const az_point_t *d = NULL;
    for (size_t i = 0; i < n; i++)
        if (vs[runs[i].variant].is_default)
            d = az_best_point(o, &runs[i]);
    char vsdef[256] = "";
    if (vs[r->variant].is_default)
        snprintf(vsdef, sizeof(vsdef), ", better than every variant measured");
    else if (d && d->throughput > 0) { /* against the default, on what the objectives weigh */
        int k = 0;
        if (o->w_throughput > 0 || (o->w_latency <= 0 && o->w_memory <= 0))
            k += snprintf(vsdef + k, sizeof(vsdef) - (size_t)k,
                          ", %.2fx the default's throughput (%.0f infer/sec)",
                          p->throughput / d->throughput, d->throughput);
        if (o->w_latency > 0 && d->p99_ms > 0 && (size_t)k < sizeof(vsdef))
            k += snprintf(vsdef + k, sizeof(vsdef) - (size_t)k, ", %.2fx the default's p99 "
                          "(%.2f ms)", p->p99_ms / d->p99_ms, d->p99_ms);
        if (o->w_memory > 0 && d->mem_mb > 0 && (size_t)k < sizeof(vsdef))
            snprintf(vsdef + k, sizeof(vsdef) - (size_t)k, ", %.2fx the default's memory "
                     "(%.0f MB)", p->mem_mb / d->mem_mb, d->mem_mb);
    } else
        snprintf(vsdef, sizeof(vsdef), "; the default config met no constraint");
    snprintf(out, len, "%s (%s): %.0f infer/sec at concurrency %llu with p99 %.2f ms%s%s%s.",
             vs[r->variant].name, desc, p->throughput, (unsigned long long)p->concurrency,
             p->p99_ms, vsdef, cons[0] ? ", " : "", cons);
}

/* "2:CPU", or "1:CPU/2:GPU" for several groups, from a variant's config. */
static void groups_of(const az_variant_t *v, char *out, size_t len, int *mbs)
{
    snprintf(out, len, "?");
    *mbs = 0;
    nr_model_config_t *cfg;
    nr_status_t *st = nr_cfg_parse_json(v->config_json, strlen(v->config_json), &cfg);
    if (st) {
        nr_status_free(st);
        return;
    }
    *mbs = cfg->max_batch_size;
    int k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < cfg->n_instance_group && (size_t)k < len; i++) {
        int kind = cfg->instance_group[i].kind;
        k += snprintf(out + k, len - (size_t)k, "%s%d:%s", i ? "/" : "",
                      cfg->instance_group[i].count,
                      kind == NR_KIND_GPU ? "GPU" : kind == NR_KIND_MODEL ? "MODEL" : "CPU");
    }
    nr_cfg_free(cfg);
}

nr_status_t *az_mkdirs(const char *path)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return nr_status_new(NR_INVALID_ARG, "cannot create %s: %s", p, strerror(errno));
    return NULL;
}

nr_status_t *az_write_csv(const az_opts_t *o, const char *model, const az_variant_t *vs,
                          const az_run_t *runs, size_t n, bool first)
{
    return az_write_csv_rows(o, "metrics-model-inference.csv", "", "", model, vs, runs, n,
                             first);
}

nr_status_t *az_write_csv_rows(const az_opts_t *o, const char *file, const char *head,
                               const char *prefix, const char *model, const az_variant_t *vs,
                               const az_run_t *runs, size_t n, bool first)
{
    char dir[PATH_MAX], path[PATH_MAX + 40];
    snprintf(dir, sizeof(dir), "%s/results", o->export_path);
    nr_status_t *st = az_mkdirs(dir);
    if (st)
        return st;
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    struct stat sb;
    bool header = first || stat(path, &sb) != 0 || sb.st_size == 0;
    FILE *f = fopen(path, first ? "w" : "a");
    if (f == NULL)
        return nr_status_new(NR_INVALID_ARG, "cannot write %s: %s", path, strerror(errno));
    if (header)
        fprintf(f, "%sModel,Batch,Concurrency,Model Config Path,Instance Group,Max Batch Size,"
                   "Satisfies Constraints,Throughput (infer/sec),p99 Latency (ms),"
                   "p95 Latency (ms),p90 Latency (ms),p50 Latency (ms),Avg Latency (ms),"
                   "Client Response Wait (ms),Server Queue (ms),Server Compute Input (ms),"
                   "Server Compute Infer (ms),Server Compute Output (ms),"
                   "Max CPU Memory Usage (MB),Model Load Memory (MB),Server CPU (cores),"
                   "Stable,Error\n", head);
    for (size_t i = 0; i < n; i++) {
        const az_run_t *r = &runs[i];
        const az_variant_t *v = &vs[r->variant];
        char groups[128];
        int mbs;
        groups_of(v, groups, sizeof(groups), &mbs);
        if (r->error) { /* one row saying why the variant has no measurements */
            fprintf(f, "%s%s,%d,,%s,%s,%d,No,,,,,,,,,,,,,,,,\"", prefix, model, o->batch, v->name,
                    groups, mbs);
            for (const char *c = r->error; *c; c++)
                fputs(*c == '"' ? "\"\"" : *c == '\n' ? " " : (char[2]){*c, 0}, f);
            fputs("\"\n", f);
            continue;
        }
        for (size_t k = 0; k < r->n_pts; k++) {
            const az_point_t *p = &r->pts[k];
            fprintf(f, "%s%s,%d,%llu,%s,%s,%d,%s,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,"
                       "%.3f,%.3f,%.1f,", prefix, model, o->batch, (unsigned long long)p->concurrency,
                    v->name, groups, mbs, az_satisfies(o, r, p) ? "Yes" : "No", p->throughput,
                    p->p99_ms, p->p95_ms, p->p90_ms, p->p50_ms, p->avg_ms, p->wait_ms,
                    p->queue_ms, p->input_ms, p->infer_ms, p->output_ms, p->mem_mb);
            if (r->load_mb >= 0)
                fprintf(f, "%.1f", r->load_mb);
            fprintf(f, ",%.2f,%s,\n", p->cpu_util, p->stable ? "Yes" : "No");
        }
    }
    if (fclose(f) != 0)
        return nr_status_new(NR_INVALID_ARG, "cannot write %s: %s", path, strerror(errno));
    return NULL;
}

/* ---- the checkpoint (<checkpoint-directory>/<model>.ckpt) and the results
 * (<export-path>/results/<model>.json): one format, every run with its variant ---- */

/* {"model":...,"runs":[...] (the caller closes the object) */
static void put_runs(nr_buf_t *b, const char *model, const az_variant_t *vs, const az_run_t *runs,
                     size_t n)
{
    nr_buf_puts(b, "{\"model\":");
    nr_buf_json_str(b, model, strlen(model));
    nr_buf_puts(b, ",\"runs\":[");
    for (size_t i = 0; i < n; i++) {
        const az_run_t *r = &runs[i];
        const az_variant_t *v = &vs[r->variant];
        char desc[256];
        az_variant_describe(v, desc, sizeof(desc));
        nr_buf_printf(b, "%s{\"name\":", i ? "," : "");
        nr_buf_json_str(b, v->name, strlen(v->name));
        nr_buf_puts(b, ",\"description\":");
        nr_buf_json_str(b, desc, strlen(desc));
        nr_buf_printf(b, ",\"default\":%s,\"config\":", v->is_default ? "true" : "false");
        nr_buf_json_str(b, v->config_json, strlen(v->config_json));
        nr_buf_printf(b, ",\"min_concurrency\":%llu,\"max_concurrency\":%llu,\"load_mb\":%.3f,"
                      "\"load_s\":%.3f,\"error\":", (unsigned long long)r->min_conc,
                      (unsigned long long)r->max_conc, r->load_mb, r->load_s);
        if (r->error)
            nr_buf_json_str(b, r->error, strlen(r->error));
        else
            nr_buf_puts(b, "null");
        nr_buf_puts(b, ",\"points\":[");
        for (size_t k = 0; k < r->n_pts; k++) {
            const az_point_t *p = &r->pts[k];
            nr_buf_printf(b, "%s[%llu,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,"
                          "%.17g,%.17g,%.17g,%.17g,%d]", k ? "," : "",
                          (unsigned long long)p->concurrency, p->throughput, p->avg_ms,
                          p->p50_ms, p->p90_ms, p->p95_ms, p->p99_ms, p->queue_ms, p->input_ms,
                          p->infer_ms, p->output_ms, p->wait_ms, p->cpu_util, p->mem_mb,
                          p->stable ? 1 : 0);
        }
        nr_buf_puts(b, "]}");
    }
    nr_buf_puts(b, "]");
}

/* Writes b to path through path.tmp, so that an interrupted write leaves the old file. */
static nr_status_t *write_atomic(const char *dir, const char *path, const nr_buf_t *b)
{
    nr_status_t *st = az_mkdirs(dir);
    if (st)
        return st;
    char tmp[PATH_MAX + 80];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    bool ok = f != NULL && fwrite(b->data, 1, b->len, f) == b->len;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, path) != 0)
        return nr_status_new(NR_INVALID_ARG, "cannot write %s: %s", path, strerror(errno));
    return NULL;
}

nr_status_t *az_checkpoint_save(const az_opts_t *o, const char *model, const az_variant_t *vs,
                                const az_run_t *runs, size_t n)
{
    nr_buf_t b;
    nr_buf_init(&b);
    put_runs(&b, model, vs, runs, n);
    nr_buf_puts(&b, "}\n");
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s.ckpt", o->checkpoint_dir, model);
    nr_status_t *st = write_atomic(o->checkpoint_dir, path, &b);
    nr_buf_free(&b);
    return st;
}

nr_status_t *az_results_save(const az_opts_t *o, const char *model, const az_variant_t *vs,
                             const az_run_t *runs, size_t n, ssize_t best, const char *why,
                             char *path, size_t path_len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    put_runs(&b, model, vs, runs, n);
    nr_buf_puts(&b, ",\"best\":");
    const az_point_t *bp = best >= 0 ? az_best_point(o, &runs[best]) : NULL;
    if (bp)
        nr_buf_printf(&b, "{\"run\":%zd,\"concurrency\":%llu}", best,
                      (unsigned long long)bp->concurrency);
    else
        nr_buf_puts(&b, "null");
    nr_buf_puts(&b, ",\"why\":");
    nr_buf_json_str(&b, why, strlen(why));
    nr_buf_puts(&b, "}\n");
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/results", o->export_path);
    snprintf(path, path_len, "%s/%s.json", dir, model);
    nr_status_t *st = write_atomic(dir, path, &b);
    nr_buf_free(&b);
    return st;
}

static double num(const nr_jv_t *v)
{
    return v && nr_jv_is_number(v) ? nr_jv_number(v) : 0;
}

static char *str_of(const nr_jv_t *v)
{
    return v && v->type == NR_JV_STRING ? nr_strndup(v->u.str, v->n) : NULL;
}

static void read_run(const nr_jv_t *e, az_saved_run_t *sv)
{
    memset(sv, 0, sizeof(*sv));
    sv->config = str_of(nr_jv_get(e, "config"));
    sv->name = str_of(nr_jv_get(e, "name"));
    sv->description = str_of(nr_jv_get(e, "description"));
    sv->is_default = nr_jv_get(e, "default") && nr_jv_get(e, "default")->type == NR_JV_TRUE;
    az_run_t *r = &sv->run;
    r->min_conc = (uint64_t)num(nr_jv_get(e, "min_concurrency"));
    r->max_conc = (uint64_t)num(nr_jv_get(e, "max_concurrency"));
    r->load_mb = num(nr_jv_get(e, "load_mb"));
    r->load_s = num(nr_jv_get(e, "load_s"));
    r->error = str_of(nr_jv_get(e, "error"));
    const nr_jv_t *pts = nr_jv_get(e, "points");
    for (size_t j = 0; pts && pts->type == NR_JV_ARRAY && j < pts->n; j++) {
        const nr_jv_t *a = &pts->u.items[j];
        if (a->type != NR_JV_ARRAY || a->n != 15)
            continue;
        double f[15];
        for (size_t q = 0; q < 15; q++)
            f[q] = num(&a->u.items[q]);
        r->pts = nr_realloc(r->pts, (r->n_pts + 1) * sizeof(*r->pts));
        r->pts[r->n_pts++] = (az_point_t){(uint64_t)f[0], f[1], f[2], f[3], f[4], f[5], f[6],
                                          f[7], f[8], f[9], f[10], f[11], f[12], f[13],
                                          f[14] != 0};
    }
}

/* One model's results from obj (its model and runs) and top (the best run and the why: the
 * same object, or the models-together file's top). */
static void read_results(const nr_jv_t *obj, const nr_jv_t *top, az_results_t *out)
{
    out->model = str_of(nr_jv_get(obj, "model"));
    out->why = str_of(nr_jv_get(top, "why"));
    const nr_jv_t *best = nr_jv_get(top, "best");
    if (best && best->type == NR_JV_OBJECT) {
        out->best_run = (ssize_t)num(nr_jv_get(best, "run"));
        out->best_concurrency = (uint64_t)num(nr_jv_get(best, "concurrency"));
    }
    const nr_jv_t *rs = nr_jv_get(obj, "runs");
    for (size_t i = 0; rs && rs->type == NR_JV_ARRAY && i < rs->n; i++) {
        const nr_jv_t *e = &rs->u.items[i];
        if (nr_jv_get(e, "config") == NULL || nr_jv_get(e, "config")->type != NR_JV_STRING)
            continue;
        out->runs = nr_realloc(out->runs, (out->n + 1) * sizeof(*out->runs));
        read_run(e, &out->runs[out->n++]);
    }
    if (out->best_run >= (ssize_t)out->n)
        out->best_run = -1;
}

/* The file's JSON document (*doc freed by the caller); st names the file. */
static nr_status_t *read_json(const char *path, nr_buf_t *b, nr_json_doc_t **doc,
                              const nr_jv_t **root)
{
    if (nr_buf_read_file(b, path, (size_t)1 << 30) != 0)
        return nr_status_new(NR_INVALID_ARG, "cannot read %s: %s", path, strerror(errno));
    nr_status_t *st = nr_json_parse(b->data, b->len, doc, root);
    if (st == NULL)
        return NULL;
    nr_status_t *named = nr_status_new(st->code, "%s: %s", path, st->msg);
    nr_status_free(st);
    return named;
}

nr_status_t *az_results_load(const char *path, az_results_t *out)
{
    memset(out, 0, sizeof(*out));
    out->best_run = -1;
    nr_buf_t b;
    nr_buf_init(&b);
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root;
    nr_status_t *st = read_json(path, &b, &doc, &root);
    if (st)
        goto out;
    read_results(root, root, out);
    if (out->model == NULL)
        st = nr_status_new(NR_INVALID_ARG, "%s: not nereid-analyzer's results (no \"model\")",
                           path);
out:
    nr_json_free(doc);
    nr_buf_free(&b);
    return st;
}

void az_results_free(az_results_t *r)
{
    free(r->model);
    free(r->why);
    az_saved_free(r->runs, r->n);
    memset(r, 0, sizeof(*r));
}

size_t az_checkpoint_load(const az_opts_t *o, const char *model, az_saved_run_t **out)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s.ckpt", o->checkpoint_dir, model);
    *out = NULL;
    if (access(path, F_OK) != 0)
        return 0;
    az_results_t r;
    nr_status_t *st = az_results_load(path, &r);
    if (st) {
        fprintf(stderr, "nereid-analyzer: ignoring the checkpoint: %s\n", st->msg);
        nr_status_free(st);
        az_results_free(&r);
        return 0;
    }
    *out = r.runs;
    size_t n = r.n;
    r.runs = NULL;
    r.n = 0;
    az_results_free(&r);
    return n;
}

void az_saved_free(az_saved_run_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(s[i].config);
        free(s[i].name);
        free(s[i].description);
        az_run_free(&s[i].run);
    }
    free(s);
}

/* ---- models together: <checkpoint-directory>/models-together.ckpt and
 * <export-path>/results/models-together.json, one format: {"models":[{"model":m,"runs":[its
 * run in each combination]}...],"best":...,"why":...} ---- */

nr_status_t *az_together_save(const az_opts_t *o, bool results, const az_cands_t *c, size_t n,
                              az_run_t *const *combos, size_t n_combos, ssize_t best,
                              uint64_t best_conc, const char *why, char *path, size_t path_len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    az_run_t *runs = nr_calloc(n_combos + 1, sizeof(*runs));
    nr_buf_puts(&b, "{\"models\":[");
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < n_combos; k++)
            runs[k] = combos[k][i]; /* shallow: run k's variant indexes c[i].vs */
        nr_buf_puts(&b, i ? "," : "");
        put_runs(&b, c[i].model, c[i].vs, runs, n_combos);
        nr_buf_puts(&b, "}");
    }
    free(runs);
    nr_buf_puts(&b, "]");
    if (results) {
        if (best >= 0)
            nr_buf_printf(&b, ",\"best\":{\"run\":%zd,\"concurrency\":%llu}", best,
                          (unsigned long long)best_conc);
        else
            nr_buf_puts(&b, ",\"best\":null");
        nr_buf_puts(&b, ",\"why\":");
        nr_buf_json_str(&b, why, strlen(why));
    }
    nr_buf_puts(&b, "}\n");
    char dir[PATH_MAX];
    if (results)
        snprintf(dir, sizeof(dir), "%s/results", o->export_path);
    else
        snprintf(dir, sizeof(dir), "%s", o->checkpoint_dir);
    snprintf(path, path_len, "%s/%s", dir, results ? AZ_TOGETHER ".json" : AZ_TOGETHER ".ckpt");
    nr_status_t *st = write_atomic(dir, path, &b);
    nr_buf_free(&b);
    return st;
}

nr_status_t *az_together_load(const char *path, az_results_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    nr_buf_t b;
    nr_buf_init(&b);
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root;
    nr_status_t *st = read_json(path, &b, &doc, &root);
    const nr_jv_t *ms = st ? NULL : nr_jv_get(root, "models");
    if (st == NULL && (ms == NULL || ms->type != NR_JV_ARRAY || ms->n == 0))
        st = nr_status_new(NR_INVALID_ARG, "%s: not nereid-analyzer's models-together results "
                           "(no \"models\")", path);
    for (size_t i = 0; st == NULL && i < ms->n; i++) {
        *out = nr_realloc(*out, (*n + 1) * sizeof(**out));
        az_results_t *r = &(*out)[(*n)++];
        memset(r, 0, sizeof(*r));
        r->best_run = -1;
        read_results(&ms->u.items[i], root, r);
        if (r->model == NULL)
            st = nr_status_new(NR_INVALID_ARG, "%s: a model without its name", path);
        else if (r->n != (*out)[0].n)
            st = nr_status_new(NR_INVALID_ARG, "%s: the models have different numbers of runs",
                               path);
    }
    nr_json_free(doc);
    nr_buf_free(&b);
    return st;
}
