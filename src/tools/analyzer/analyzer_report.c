/* analyzer_report.c - the HTML report of one model's profile (analyzer.h).
 *
 * One self-contained page made from <export-path>/results/<model>.json (so `nereid-analyzer
 * report` rebuilds it without measuring): the recommendation in one sentence; throughput
 * against p99 latency, a line per run over its concurrency levels, the recommended variant
 * drawn thick with its chosen level ringed, and the Pareto front (the measurements no other
 * beats on both) dashed; memory per variant (the model's memory and the peak under load);
 * and every measurement as a table. Inline SVG and CSS only: no script, no network, so it
 * opens anywhere. The plots share nereid-perf's SVG frame (perf_svg_*).
 */
#include "analyzer.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8"};
#define BEST_COLOR "#d62728"
#define N_PALETTE (sizeof(palette) / sizeof(palette[0]))

/* The variants in the order their first run appears; vi[i] = the variant of run i. */
typedef struct {
    const char **names;
    size_t n;
    size_t *vi;
} variants_t;

static void variants_of(const az_results_t *r, variants_t *v)
{
    v->names = nr_calloc(r->n + 1, sizeof(*v->names));
    v->vi = nr_calloc(r->n + 1, sizeof(*v->vi));
    v->n = 0;
    for (size_t i = 0; i < r->n; i++) {
        const char *name = r->runs[i].name ? r->runs[i].name : "?";
        size_t k = 0;
        while (k < v->n && strcmp(v->names[k], name) != 0)
            k++;
        if (k == v->n)
            v->names[v->n++] = name;
        v->vi[i] = k;
    }
}

/* The width in pixels that the longest variant name takes at font-size 12 (about 7 a
 * character), and at least min. */
static double names_width(const variants_t *v, double min)
{
    size_t longest = 0;
    for (size_t k = 0; k < v->n; k++)
        longest = strlen(v->names[k]) > longest ? strlen(v->names[k]) : longest;
    double w = 7.0 * (double)longest + 16;
    return w > min ? w : min;
}

static bool is_best_variant(const az_results_t *r, const variants_t *v, size_t run)
{
    return r->best_run >= 0 && v->vi[run] == v->vi[r->best_run];
}

static const char *color_of(const az_results_t *r, const variants_t *v, size_t run)
{
    return is_best_variant(r, v, run) ? BEST_COLOR : palette[v->vi[run] % N_PALETTE];
}

/* The measurements no other one beats on both throughput (higher) and p99 (lower), by p99. */
static size_t pareto(const az_results_t *r, const az_point_t ***out)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++)
        n += r->runs[i].run.n_pts;
    const az_point_t **all = nr_calloc(n + 1, sizeof(*all));
    const az_point_t **front = nr_calloc(n + 1, sizeof(*front));
    size_t k = 0, f = 0;
    for (size_t i = 0; i < r->n; i++)
        for (size_t j = 0; j < r->runs[i].run.n_pts; j++)
            all[k++] = &r->runs[i].run.pts[j];
    for (size_t i = 0; i < n; i++) { /* insertion sort by p99, then throughput descending */
        const az_point_t *p = all[i];
        size_t j = i;
        for (; j > 0 && (all[j - 1]->p99_ms > p->p99_ms ||
                         (all[j - 1]->p99_ms == p->p99_ms && all[j - 1]->throughput <
                                                                 p->throughput)); j--)
            all[j] = all[j - 1];
        all[j] = p;
    }
    double top = -1;
    for (size_t i = 0; i < n; i++)
        if (all[i]->throughput > top) {
            front[f++] = all[i];
            top = all[i]->throughput;
        }
    free(all);
    *out = front;
    return f;
}

/* One run: a line over its levels, a dot per level with its figures as the tooltip. */
static void plot_run(nr_buf_t *b, const perf_svg_t *f, const az_results_t *r,
                     const variants_t *v, size_t run)
{
    const az_run_t *ru = &r->runs[run].run;
    bool best = is_best_variant(r, v, run);
    const char *color = color_of(r, v, run);
    if (ru->n_pts > 1) {
        nr_buf_printf(b, "<polyline class=\"run\" fill=\"none\" stroke=\"%s\" "
                      "stroke-width=\"%s\" points=\"", color, best ? "4" : "1.5");
        for (size_t j = 0; j < ru->n_pts; j++)
            nr_buf_printf(b, "%s%.1f,%.1f", j ? " " : "", perf_svg_x(f, ru->pts[j].p99_ms),
                          perf_svg_y(f, ru->pts[j].throughput));
        nr_buf_puts(b, "\"/>\n");
    }
    for (size_t j = 0; j < ru->n_pts; j++) {
        const az_point_t *p = &ru->pts[j];
        nr_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"><title>",
                      perf_svg_x(f, p->p99_ms), perf_svg_y(f, p->throughput), best ? "5" : "3.5",
                      color);
        perf_svg_xml(b, v->names[v->vi[run]]);
        nr_buf_printf(b, ", concurrency %llu: %.1f infer/s, p99 %.2f ms</title></circle>\n",
                      (unsigned long long)p->concurrency, p->throughput, p->p99_ms);
    }
}

/* id: the suffix of the plot's element ids ("" on a model's page; the model's index on the
 * models-together page, which has a plot per model). */
static void plot_latency(nr_buf_t *b, const az_results_t *r, const variants_t *v,
                         const char *id)
{
    double legend = names_width(v, 250) + 50; /* right of the plot */
    perf_svg_t f = {.W = 680 + legend, .H = 480, .L = 80, .R = legend, .T = 20, .B = 60};
    double xmax = 0, ymax = 0;
    for (size_t i = 0; i < r->n; i++)
        for (size_t j = 0; j < r->runs[i].run.n_pts; j++) {
            const az_point_t *p = &r->runs[i].run.pts[j];
            xmax = p->p99_ms > xmax ? p->p99_ms : xmax;
            ymax = p->throughput > ymax ? p->throughput : ymax;
        }
    nr_buf_printf(b, "<svg id=\"latency%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", id, f.W, f.H);
    perf_svg_frame(b, &f, xmax, ymax, "p99 latency (ms)", "throughput (infer/s)");
    for (int pass = 0; pass < 2; pass++) /* the recommended variant last, on top */
        for (size_t run = 0; run < r->n; run++)
            if (is_best_variant(r, v, run) == (pass == 1))
                plot_run(b, &f, r, v, run);
    const az_point_t **front;
    size_t nf = pareto(r, &front);
    nr_buf_printf(b, "<polyline id=\"pareto%s\" fill=\"none\" stroke=\"black\" "
                  "stroke-width=\"1.2\" stroke-dasharray=\"5,4\" points=\"", id);
    for (size_t i = 0; i < nf; i++)
        nr_buf_printf(b, "%s%.1f,%.1f", i ? " " : "", perf_svg_x(&f, front[i]->p99_ms),
                      perf_svg_y(&f, front[i]->throughput));
    nr_buf_puts(b, "\"/>\n");
    free(front);
    if (r->best_run >= 0) { /* the recommended level, ringed */
        const az_run_t *ru = &r->runs[r->best_run].run;
        for (size_t j = 0; j < ru->n_pts; j++)
            if (ru->pts[j].concurrency == r->best_concurrency) {
                double x = perf_svg_x(&f, ru->pts[j].p99_ms);
                double y = perf_svg_y(&f, ru->pts[j].throughput);
                nr_buf_printf(b, "<circle id=\"recommended%s\" cx=\"%.1f\" cy=\"%.1f\" "
                              "r=\"11\" fill=\"none\" stroke=\"" BEST_COLOR "\" "
                              "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\" fill=\""
                              BEST_COLOR "\" font-weight=\"bold\">recommended</text>\n", id, x,
                              y, x + 14, y - 12);
                break;
            }
    }
    /* the legend, right of the plot */
    double lx = f.W - f.R + 20, ly = f.T + 10;
    for (size_t k = 0; k < v->n; k++, ly += 18) {
        size_t run = 0;
        while (v->vi[run] != k)
            run++;
        nr_buf_printf(b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                      "stroke-width=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">", lx, ly, lx + 22, ly,
                      color_of(r, v, run), is_best_variant(r, v, run) ? "4" : "2", lx + 28,
                      ly + 4);
        perf_svg_xml(b, v->names[k]);
        nr_buf_puts(b, "</text>\n");
    }
    nr_buf_printf(b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\" "
                  "stroke-dasharray=\"5,4\"/><text x=\"%.0f\" y=\"%.0f\">Pareto front</text>\n",
                  lx, ly, lx + 22, ly, lx + 28, ly + 4);
    nr_buf_puts(b, "</svg>\n");
}

/* Per variant: the model's memory and the peak RSS under load (the largest of its runs). */
static void plot_memory(nr_buf_t *b, const az_results_t *r, const variants_t *v)
{
    double *load = nr_calloc(v->n + 1, sizeof(double));
    double *peak = nr_calloc(v->n + 1, sizeof(double));
    double max = 0;
    for (size_t i = 0; i < r->n; i++) {
        const az_run_t *ru = &r->runs[i].run;
        size_t k = v->vi[i];
        load[k] = ru->load_mb > load[k] ? ru->load_mb : load[k];
        for (size_t j = 0; j < ru->n_pts; j++)
            peak[k] = ru->pts[j].mem_mb > peak[k] ? ru->pts[j].mem_mb : peak[k];
        max = peak[k] > max ? peak[k] : max;
        max = load[k] > max ? load[k] : max;
    }
    const double L = names_width(v, 220), W = L + 760, R = 120, row = 34;
    double H = 50 + row * (double)v->n;
    double scale = max > 0 ? (W - L - R) / max : 0;
    nr_buf_printf(b, "<svg id=\"memory\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                  "<rect x=\"%.0f\" y=\"8\" width=\"14\" height=\"10\" fill=\"#9ecae1\"/>"
                  "<text x=\"%.0f\" y=\"17\">model (what its unload frees, MB)</text>"
                  "<rect x=\"%.0f\" y=\"8\" width=\"14\" height=\"10\" fill=\"#3182bd\"/>"
                  "<text x=\"%.0f\" y=\"17\">server peak RSS under load (MB)</text>\n",
                  W, H, L, L + 20, L + 240, L + 260);
    for (size_t k = 0; k < v->n; k++) {
        double y = 34 + row * (double)k;
        nr_buf_printf(b, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">", L - 8, y + 16);
        perf_svg_xml(b, v->names[k]);
        nr_buf_printf(b, "</text>\n<rect class=\"bar\" x=\"%.0f\" y=\"%.0f\" width=\"%.1f\" "
                      "height=\"12\" fill=\"#3182bd\"/><text x=\"%.1f\" y=\"%.0f\">%.1f</text>\n"
                      "<rect class=\"bar\" x=\"%.0f\" y=\"%.0f\" width=\"%.1f\" height=\"12\" "
                      "fill=\"#9ecae1\"/><text x=\"%.1f\" y=\"%.0f\">%.1f</text>\n",
                      L, y, peak[k] * scale, L + peak[k] * scale + 4, y + 10, peak[k],
                      L, y + 13, load[k] > 0 ? load[k] * scale : 0,
                      L + (load[k] > 0 ? load[k] * scale : 0) + 4, y + 23,
                      load[k] > 0 ? load[k] : 0);
    }
    nr_buf_puts(b, "</svg>\n");
    free(load);
    free(peak);
}

/* first: the first column's heading (what the runs' names are) */
static void table(nr_buf_t *b, const az_results_t *r, const variants_t *v, const char *first)
{
    nr_buf_printf(b, "<table>\n<tr><th>%s</th><th>Settings</th><th>Concurrency</th>", first);
    nr_buf_puts(b, ""
                "<th>Throughput (infer/sec)</th><th>p99 Latency (ms)</th><th>p50 Latency (ms)"
                "</th><th>Server Queue (ms)</th><th>Server Compute Infer (ms)</th>"
                "<th>Max CPU Memory Usage (MB)</th><th>Model Load Memory (MB)</th>"
                "<th>Server CPU (cores)</th><th>Stable</th></tr>\n");
    for (size_t i = 0; i < r->n; i++) {
        const az_saved_run_t *s = &r->runs[i];
        if (s->run.error) {
            nr_buf_puts(b, "<tr class=\"error\"><td>");
            perf_svg_xml(b, v->names[v->vi[i]]);
            nr_buf_puts(b, "</td><td colspan=\"11\">");
            perf_svg_xml(b, s->run.error);
            nr_buf_puts(b, "</td></tr>\n");
        }
        for (size_t j = 0; j < s->run.n_pts; j++) {
            const az_point_t *p = &s->run.pts[j];
            bool rec = (ssize_t)i == r->best_run && p->concurrency == r->best_concurrency;
            nr_buf_printf(b, "<tr%s><td>", rec ? " class=\"recommended\"" : "");
            perf_svg_xml(b, v->names[v->vi[i]]);
            nr_buf_puts(b, "</td><td>");
            perf_svg_xml(b, s->description ? s->description : "");
            nr_buf_printf(b, "</td><td>%llu</td><td>%.1f</td><td>%.3f</td><td>%.3f</td>"
                          "<td>%.3f</td><td>%.3f</td><td>%.1f</td><td>%.1f</td><td>%.2f</td>"
                          "<td>%s</td></tr>\n", (unsigned long long)p->concurrency,
                          p->throughput, p->p99_ms, p->p50_ms, p->queue_ms, p->infer_ms,
                          p->mem_mb, s->run.load_mb > 0 ? s->run.load_mb : 0, p->cpu_util,
                          p->stable ? "Yes" : "No");
        }
    }
    nr_buf_puts(b, "</table>\n");
}

/* The page's head, its style and the title as <h1>. */
static void page_head(nr_buf_t *b, const char *title)
{
    nr_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                "<title>nereid-analyzer: ");
    perf_svg_xml(b, title);
    nr_buf_puts(b, "</title>\n<style>\nbody{font-family:sans-serif;margin:24px;color:#222}\n"
                "table{border-collapse:collapse;font-size:13px}\n"
                "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\n"
                "td:first-child,td:nth-child(2),th{text-align:left}\n"
                "tr.recommended{background:#fde0dd;font-weight:bold}\n"
                "tr.error{background:#eee}\n.why{font-size:16px;max-width:980px}\n"
                "</style></head><body>\n<h1>");
    perf_svg_xml(b, title);
    nr_buf_puts(b, "</h1>\n<p class=\"why\">");
}

static size_t points_of(const az_results_t *r)
{
    size_t points = 0;
    for (size_t i = 0; i < r->n; i++)
        points += r->runs[i].run.n_pts;
    return points;
}

/* <export-path>/reports/summaries/<name>/result_summary.html: its folder made, its path into
 * out. */
static nr_status_t *report_path(const char *export_path, const char *name, char *out,
                                size_t out_len)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/reports/summaries/%s", export_path, name);
    snprintf(out, out_len, "%s/result_summary.html", dir);
    return az_mkdirs(dir);
}

nr_status_t *az_report_write(const char *export_path, const az_results_t *r, char *out,
                             size_t out_len)
{
    nr_status_t *st = report_path(export_path, r->model, out, out_len);
    if (st)
        return st;
    variants_t v;
    variants_of(r, &v);
    nr_buf_t b;
    nr_buf_init(&b);
    char *title = nr_asprintf("%s: nereid-analyzer profile", r->model);
    page_head(&b, title);
    free(title);
    perf_svg_xml(&b, r->why ? r->why : "");
    nr_buf_printf(&b, "</p>\n<p>%zu variants, %zu runs, %zu measurements.</p>\n"
                  "<h2>Throughput against p99 latency</h2>\n", v.n, r->n, points_of(r));
    plot_latency(&b, r, &v, "");
    nr_buf_puts(&b, "<h2>Memory per variant</h2>\n");
    plot_memory(&b, r, &v);
    nr_buf_puts(&b, "<h2>Every measurement</h2>\n");
    table(&b, r, &v, "Model Config Path");
    nr_buf_puts(&b, "</body></html>\n");
    st = perf_write_file(out, &b);
    nr_buf_free(&b);
    free(v.names);
    free(v.vi);
    return st;
}

nr_status_t *az_report_together(const char *export_path, az_results_t *pm, size_t n, char *out,
                                size_t out_len)
{
    nr_status_t *st = report_path(export_path, AZ_TOGETHER, out, out_len);
    if (st)
        return st;
    /* each combination's name, "2: a_config_0 + b_config_default", as every model's run name */
    for (size_t k = 0; k < pm[0].n; k++) {
        nr_buf_t name;
        nr_buf_init(&name);
        nr_buf_printf(&name, "%zu: ", k);
        for (size_t i = 0; i < n; i++)
            nr_buf_printf(&name, "%s%s", i ? " + " : "", pm[i].runs[k].name ? pm[i].runs[k].name
                                                                            : "?");
        for (size_t i = 0; i < n; i++) {
            free(pm[i].runs[k].name);
            pm[i].runs[k].name = nr_strndup(name.data, name.len);
        }
        nr_buf_free(&name);
    }
    variants_t *v = nr_calloc(n, sizeof(*v));
    nr_buf_t b, title;
    nr_buf_init(&b);
    nr_buf_init(&title);
    size_t points = 0;
    for (size_t i = 0; i < n; i++) {
        variants_of(&pm[i], &v[i]);
        nr_buf_printf(&title, "%s%s", i ? " + " : "", pm[i].model);
        points += points_of(&pm[i]);
    }
    nr_buf_puts(&title, ": nereid-analyzer, the models served together");
    page_head(&b, title.data);
    perf_svg_xml(&b, pm[0].why ? pm[0].why : "");
    nr_buf_printf(&b, "</p>\n<p>%zu combinations, %zu measurements (every model of a "
                  "combination loaded in one server and under load at the same time).</p>\n",
                  pm[0].n, points);
    for (size_t i = 0; i < n; i++) {
        char id[24];
        snprintf(id, sizeof(id), "%zu", i);
        nr_buf_puts(&b, "<h2>");
        perf_svg_xml(&b, pm[i].model);
        nr_buf_puts(&b, ": throughput against p99 latency beside the others</h2>\n");
        plot_latency(&b, &pm[i], &v[i], id);
    }
    nr_buf_puts(&b, "<h2>Memory per combination (the server with all the models)</h2>\n");
    plot_memory(&b, &pm[0], &v[0]);
    for (size_t i = 0; i < n; i++) {
        nr_buf_puts(&b, "<h2>");
        perf_svg_xml(&b, pm[i].model);
        nr_buf_puts(&b, ": every measurement</h2>\n");
        table(&b, &pm[i], &v[i], "Combination");
    }
    nr_buf_puts(&b, "</body></html>\n");
    st = perf_write_file(out, &b);
    nr_buf_free(&b);
    nr_buf_free(&title);
    for (size_t i = 0; i < n; i++) {
        free(v[i].names);
        free(v[i].vi);
    }
    free(v);
    return st;
}
