/* perf_export.c - what nereid-perf writes beside perf_analyzer's outputs (perf.h): a JSON
 * report with each step's figures and its whole latency histogram (--json), and a plot of
 * throughput against latency over the sweep as SVG (--plot). Both are written after the sweep
 * from the merged windows the console reports.
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

nr_status_t *perf_write_file(const char *path, const nr_buf_t *b)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return nr_status_new(NR_INVALID_ARG, "failed to open file '%s': %s", path, strerror(errno));
    bool ok = fwrite(b->data, 1, b->len, f) == b->len;
    ok &= fclose(f) == 0;
    return ok ? NULL : nr_status_new(NR_INVALID_ARG, "failed to write '%s'", path);
}

/* A model's server figures; an ensemble's with its composing models' ("composing_models":
 * name, version and the same figures, a nested ensemble's with its own). */
static void json_server(nr_buf_t *b, const perf_server_stats_t *s, const perf_comp_t *comp,
                        size_t n_comp)
{
    nr_buf_printf(b, "{\"inference_count\":%llu,\"execution_count\":%llu,\"success_count\":%llu,"
                  "\"success_ns\":%llu,\"queue_ns\":%llu,\"compute_input_ns\":%llu,"
                  "\"compute_infer_ns\":%llu,\"compute_output_ns\":%llu",
                  (unsigned long long)s->inference_count, (unsigned long long)s->execution_count,
                  (unsigned long long)s->success_count, (unsigned long long)s->success_ns,
                  (unsigned long long)s->queue_ns, (unsigned long long)s->input_ns,
                  (unsigned long long)s->infer_ns, (unsigned long long)s->output_ns);
    if (n_comp)
        nr_buf_puts(b, ",\"composing_models\":[");
    for (size_t i = 0; i < n_comp; i += 1 + comp[i].n_desc) {
        nr_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        nr_buf_json_str(b, comp[i].name, strlen(comp[i].name));
        nr_buf_puts(b, ",\"version\":");
        nr_buf_json_str(b, comp[i].version, strlen(comp[i].version));
        nr_buf_puts(b, ",\"server\":");
        json_server(b, &comp[i].s, &comp[i + 1], comp[i].n_desc);
        nr_buf_putc(b, '}');
    }
    if (n_comp)
        nr_buf_putc(b, ']');
    nr_buf_putc(b, '}');
}

nr_status_t *perf_write_json(const perf_opts_t *o, const perf_step_t *steps, size_t n)
{
    nr_buf_t b;
    nr_buf_init(&b);
    nr_buf_puts(&b, "{\"model\":");
    nr_buf_json_str(&b, o->model, strlen(o->model));
    nr_buf_printf(&b, ",\"protocol\":\"%s\",\"mode\":\"%s\",\"batch_size\":%d,"
                  "\"stabilizing_latency\":\"%s\",\"steps\":[",
                  o->grpc ? "grpc" : "http", o->rate_mode ? "request_rate" : "concurrency",
                  o->batch, o->percentile > 0 ? "percentile" : "average");
    static const double ps[] = {50, 90, 95, 99, 99.9};
    for (size_t i = 0; i < n; i++) {
        const perf_window_t *w = &steps[i].merged;
        const perf_hist_t *h = &w->lat;
        uint64_t c = w->count ? w->count : 1;
        if (o->rate_mode)
            nr_buf_printf(&b, "%s{\"request_rate\":%g", i ? "," : "", steps[i].rate);
        else
            nr_buf_printf(&b, "%s{\"concurrency\":%llu", i ? "," : "",
                          (unsigned long long)steps[i].value);
        nr_buf_printf(&b, ",\"requests\":%llu,\"seconds\":%.6f,\"throughput\":%.3f,"
                      "\"delayed\":%llu,\"latency_us\":{\"avg\":%.3f,\"std\":%.3f,\"min\":%.3f,"
                      "\"max\":%.3f", (unsigned long long)w->count,
                      (double)(w->end_ns - w->start_ns) / 1e9, perf_throughput(o, w),
                      (unsigned long long)w->delayed, perf_hist_mean(h) / 1e3,
                      perf_hist_stddev(h) / 1e3, (double)h->min / 1e3, (double)h->max / 1e3);
        for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++)
            nr_buf_printf(&b, ",\"p%g\":%.3f", ps[k], (double)perf_hist_percentile(h, ps[k]) / 1e3);
        if (o->percentile > 0)
            nr_buf_printf(&b, ",\"p%d\":%.3f", o->percentile,
                          (double)perf_hist_percentile(h, o->percentile) / 1e3);
        nr_buf_printf(&b, "},\"client_us\":{\"send\":%.3f,\"recv\":%.3f,\"exchange\":%.3f}",
                      (double)w->send_ns / c / 1e3, (double)w->recv_ns / c / 1e3,
                      (double)w->lib_ns / c / 1e3);
        if (w->have_server) {
            nr_buf_puts(&b, ",\"server\":");
            json_server(&b, &w->server, w->comp, w->n_comp);
        }
        /* every non-empty bucket: [lowest ns, highest ns, count] */
        nr_buf_puts(&b, ",\"histogram_ns\":[");
        bool first = true;
        for (size_t k = 0; h->counts && k < PERF_HIST_BUCKETS; k++) {
            if (h->counts[k] == 0)
                continue;
            uint64_t lo, hi;
            perf_hist_bucket(k, &lo, &hi);
            nr_buf_printf(&b, "%s[%llu,%llu,%u]", first ? "" : ",", (unsigned long long)lo,
                          (unsigned long long)hi, h->counts[k]);
            first = false;
        }
        nr_buf_puts(&b, "]}");
    }
    nr_buf_puts(&b, "]}\n");
    nr_status_t *st = perf_write_file(o->json, &b);
    nr_buf_free(&b);
    return st;
}

/* A "nice" axis step (1, 2 or 5 times a power of ten) giving about 5 ticks up to max. */
static double tick(double max)
{
    double raw = max / 5, p = pow(10, floor(log10(raw > 0 ? raw : 1))), m = raw / p;
    return p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10);
}

void perf_svg_xml(nr_buf_t *b, const char *text)
{
    for (const char *p = text; *p; p++)
        switch (*p) {
        case '&': nr_buf_puts(b, "&amp;"); break;
        case '<': nr_buf_puts(b, "&lt;"); break;
        case '>': nr_buf_puts(b, "&gt;"); break;
        case '"': nr_buf_puts(b, "&quot;"); break;
        default: nr_buf_putc(b, *p);
        }
}

double perf_svg_x(const perf_svg_t *f, double v)
{
    return f->L + v / f->xmax * (f->W - f->L - f->R);
}

double perf_svg_y(const perf_svg_t *f, double v)
{
    return f->H - f->B - v / f->ymax * (f->H - f->T - f->B);
}

void perf_svg_frame(nr_buf_t *b, perf_svg_t *f, double xmax, double ymax, const char *xlabel,
                    const char *ylabel)
{
    double xs = tick(xmax * 1.05), ys = tick(ymax * 1.05);
    f->xmax = ceil(xmax * 1.05 / xs) * xs, f->ymax = ceil(ymax * 1.05 / ys) * ys;
    if (f->xmax <= 0)
        f->xmax = xs = 1;
    if (f->ymax <= 0)
        f->ymax = ys = 1;
    for (double v = 0; v <= f->xmax + xs / 2; v += xs)
        nr_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                      perf_svg_x(f, v), perf_svg_y(f, 0), perf_svg_x(f, v),
                      perf_svg_y(f, f->ymax), perf_svg_x(f, v), perf_svg_y(f, 0) + 18, v);
    for (double v = 0; v <= f->ymax + ys / 2; v += ys)
        nr_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                      perf_svg_x(f, 0), perf_svg_y(f, v), perf_svg_x(f, f->xmax),
                      perf_svg_y(f, v), perf_svg_x(f, 0) - 6, perf_svg_y(f, v) + 4, v);
    double mid_y = (f->T + f->H - f->B) / 2;
    nr_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
                  (f->L + f->W - f->R) / 2, f->H - 16);
    perf_svg_xml(b, xlabel);
    nr_buf_printf(b, "</text>\n<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
                  "transform=\"rotate(-90 18 %.1f)\">", mid_y, mid_y);
    perf_svg_xml(b, ylabel);
    nr_buf_puts(b, "</text>\n");
}

nr_status_t *perf_write_plot(const perf_opts_t *o, const perf_step_t *steps, size_t n)
{
    perf_svg_t f = {.W = 720, .H = 440, .L = 80, .R = 30, .T = 40, .B = 60};
    double xmax = 0, ymax = 0;
    for (size_t i = 0; i < n; i++) {
        const perf_window_t *w = &steps[i].merged;
        double x = (double)perf_stab_latency(o, w) / 1e6, y = perf_throughput(o, w);
        xmax = x > xmax ? x : xmax;
        ymax = y > ymax ? y : ymax;
    }
    nr_buf_t b;
    nr_buf_init(&b);
    nr_buf_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                  "font-family=\"sans-serif\" font-size=\"12\">\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", f.W, f.H);
    nr_buf_printf(&b, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">", f.L);
    perf_svg_xml(&b, o->model);
    nr_buf_printf(&b, ": throughput against %s latency (%s, batch %d)</text>\n",
                  o->percentile > 0 ? "percentile" : "average", o->grpc ? "gRPC" : "HTTP",
                  o->batch);
    char lat[32] = "avg latency (ms)";
    if (o->percentile > 0)
        snprintf(lat, sizeof(lat), "p%d latency (ms)", o->percentile);
    perf_svg_frame(&b, &f, xmax, ymax, lat, "throughput (infer/s)");
    nr_buf_puts(&b, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"");
    for (size_t i = 0; i < n; i++)
        nr_buf_printf(&b, "%s%.1f,%.1f", i ? " " : "",
                      perf_svg_x(&f, (double)perf_stab_latency(o, &steps[i].merged) / 1e6),
                      perf_svg_y(&f, perf_throughput(o, &steps[i].merged)));
    nr_buf_puts(&b, "\"/>\n");
    for (size_t i = 0; i < n; i++) {
        double x = perf_svg_x(&f, (double)perf_stab_latency(o, &steps[i].merged) / 1e6);
        double y = perf_svg_y(&f, perf_throughput(o, &steps[i].merged));
        nr_buf_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#1f77b4\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\">", x, y, x + 6, y - 6);
        if (o->rate_mode)
            nr_buf_printf(&b, "%g/s</text>\n", steps[i].rate);
        else
            nr_buf_printf(&b, "c=%llu</text>\n", (unsigned long long)steps[i].value);
    }
    nr_buf_puts(&b, "</svg>\n");
    nr_status_t *st = perf_write_file(o->plot, &b);
    nr_buf_free(&b);
    return st;
}
