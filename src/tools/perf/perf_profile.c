/* perf_profile.c - --profile-export-file (perf.h), perf_analyzer's per-request export: for
 * every level, the requests of its reported windows (those whose response came inside them),
 * each with its send time, its response time, its inputs and the outputs the server sent,
 * and the windows' boundaries; times in ns since the epoch, values as Triton's JSON writer
 * prints them. The records are rendered by the load's workers as the responses arrive and
 * travel with their window (perf_window_t.records), so a window that is not reported drops
 * its own.
 */
#include "perf.h"

#include "../../common/alloc.h"
#include "../../config/model_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float half_to_float(uint16_t h)
{
    int e = (h >> 10) & 0x1f, f = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)f, -24)
              : e == 31 ? (f ? NAN : INFINITY)
                        : ldexpf((float)(f | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

void perf_json_tensor(nr_buf_t *out, const char *name, size_t name_len, const char *datatype,
                      size_t dt_len, const void *data, size_t bytes, size_t max_elems)
{
    nr_buf_json_str(out, name, name_len);
    nr_buf_puts(out, ":[");
    const uint8_t *p = data;
    nr_dtype_t t = nr_dtype_from_kserve(datatype, dt_len);
    size_t es = t == NR_TYPE_FP16 || t == NR_TYPE_BF16 ? 2 : nr_dtype_size(t);
    size_t n = 0;
    if (t == NR_TYPE_STRING) { /* 4-byte length, then the bytes */
        for (size_t at = 0; at + 4 <= bytes && n < max_elems; n++) {
            uint32_t len;
            memcpy(&len, p + at, 4);
            if (len > bytes - at - 4)
                break;
            if (n)
                nr_buf_putc(out, ',');
            nr_buf_json_str(out, (const char *)p + at + 4, len);
            at += 4 + (size_t)len;
        }
    } else if (es) {
        for (; n < bytes / es && n < max_elems; n++) {
            if (n)
                nr_buf_putc(out, ',');
            uint16_t h;
            if (t == NR_TYPE_FP16 || t == NR_TYPE_BF16) {
                memcpy(&h, p + n * es, 2);
                if (t == NR_TYPE_FP16) {
                    nr_buf_double(out, (double)half_to_float(h));
                } else {
                    uint32_t bits = (uint32_t)h << 16;
                    float f;
                    memcpy(&f, &bits, 4);
                    nr_buf_double(out, (double)f);
                }
            } else {
                (void)nr_dtype_json_elem(out, t, p + n * es);
            }
        }
    }
    nr_buf_putc(out, ']');
}

/* One request's "request_inputs" object, from its data as built: as perf_analyzer, the values
 * of one batch element (the data entry), not the whole batch. */
void perf_profile_inputs(const perf_model_t *m, const nr_buf_t *data, nr_buf_t *out)
{
    nr_buf_putc(out, '{');
    for (size_t i = 0; i < m->n_inputs; i++) {
        const perf_input_t *in = &m->inputs[i];
        size_t elems = 1;
        for (size_t k = m->max_batch_size > 0 ? 1 : 0; k < in->n_shape; k++)
            elems *= (size_t)in->shape[k];
        if (i)
            nr_buf_putc(out, ',');
        perf_json_tensor(out, in->name, strlen(in->name), in->datatype, strlen(in->datatype),
                         data->data + in->offset, in->bytes, elems);
    }
    nr_buf_putc(out, '}');
}

void perf_profile_record(nr_buf_t *records, const perf_model_t *m, size_t request,
                         uint64_t sent_ns, uint64_t answered_ns, const nr_buf_t *outputs)
{
    const nr_buf_t *in = &m->profile_inputs[request];
    nr_buf_reserve(records, 160 + in->len + outputs->len);
    if (records->len)
        nr_buf_putc(records, ',');
    nr_buf_puts(records, "{\"timestamp\":");
    nr_buf_u64(records, sent_ns);
    nr_buf_puts(records, ",\"request_inputs\":");
    nr_buf_append(records, in->data, in->len);
    nr_buf_puts(records, ",\"response_timestamps\":[");
    nr_buf_u64(records, answered_ns);
    nr_buf_puts(records, "],\"response_outputs\":[");
    nr_buf_append(records, outputs->data, outputs->len);
    nr_buf_puts(records, "]}");
}

nr_status_t *perf_write_profile(const perf_opts_t *o, const perf_step_t *steps, size_t n)
{
    nr_buf_t b;
    nr_buf_init(&b);
    nr_buf_puts(&b, "{\"experiments\":[");
    for (size_t i = 0; i < n; i++) {
        const perf_window_t *w = &steps[i].merged;
        nr_buf_printf(&b, "%s{\"experiment\":{\"mode\":\"%s\",\"value\":", i ? "," : "",
                      o->rate_mode ? "request_rate" : "concurrency");
        if (o->rate_mode)
            nr_buf_double(&b, steps[i].rate);
        else
            nr_buf_u64(&b, steps[i].value);
        nr_buf_puts(&b, "},\"requests\":[");
        nr_buf_append(&b, w->records.data, w->records.len);
        nr_buf_puts(&b, "],\"window_boundaries\":[");
        for (size_t k = 0; k < w->n_bounds; k++) {
            if (k)
                nr_buf_putc(&b, ',');
            nr_buf_u64(&b, w->bounds[k]);
        }
        nr_buf_puts(&b, "]}");
    }
    nr_buf_puts(&b, "],\"version\":");
    nr_buf_puts(&b, "\"" PERF_PA_VERSION "\""); /* the format's: perf_analyzer 2.51's */
    nr_buf_puts(&b, ",\"service_kind\":\"triton\",\"endpoint\":\"\"}");
    nr_status_t *st = perf_write_file(o->profile_export, &b);
    nr_buf_free(&b);
    return st;
}
