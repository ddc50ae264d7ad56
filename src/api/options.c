/* options.c - the server's options (options.h): Triton's flags as one table. */
#include "options.h"

#include "../backends/backend.h"
#include "../common/alloc.h"
#include "../common/debug.h"
#include "../common/limits.h"
#include "../common/log.h"
#include "../core/cache.h"
#include "../core/headers.h"
#include "../core/host_policy.h"
#include "../core/rate_limit.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define OPT(field) offsetof(nr_opts_t, field)

static nr_status_t *set_no_autocomplete(void *o, const nr_cli_opt_t *f, const char *v)
{
    ((nr_opts_t *)o)->autocomplete = false;
    ((nr_opts_t *)o)->given.no_autocomplete = true;
    return NULL;
}

static nr_status_t *add_repository(void *o, const nr_cli_opt_t *f, const char *v)
{
    nr_opts_t *op = o;
    op->repos = nr_realloc(op->repos, (op->n_repos + 1) * sizeof(char *));
    op->repos[op->n_repos++] = v;
    return NULL;
}

static nr_status_t *add_load_model(void *o, const nr_cli_opt_t *f, const char *v)
{
    nr_opts_t *op = o;
    op->load_models = nr_realloc(op->load_models, (op->n_load_models + 1) * sizeof(char *));
    op->load_models[op->n_load_models++] = v;
    return NULL;
}

static nr_status_t *set_strict_model_config(void *o, const nr_cli_opt_t *f, const char *v)
{
    bool b;
    if (!nr_cli_bool(v, &b))
        return nr_cli_bad_value(v);
    fprintf(stderr, "Warning: '--strict-model-config' has been deprecated! Please use "
                    "'--disable-auto-complete-config' instead.\n");
    ((nr_opts_t *)o)->autocomplete = !b;
    ((nr_opts_t *)o)->given.strict_model_config = b ? 1 : 0;
    return NULL;
}

static nr_status_t *set_compression(void *o, const nr_cli_opt_t *f, const char *v)
{
    static const char *const levels[] = {"none", "low", "medium", "high"};
    for (size_t i = 0; i < 4; i++)
        if (!strcasecmp(v, levels[i])) {
            ((nr_opts_t *)o)->grpc.compression = (nr_grpc_compression_t)i;
            return NULL;
        }
    return nr_status_new(NR_INVALID_ARG,
                         "invalid argument for --grpc_infer_response_compression_level");
}

/* ---- flags accepted without their effect: one warning line each at start ----------------
 * A Triton command line must start nereid, and a flag that does nothing here must say so: its
 * note is printed once (however often the flag is given) when the server starts, after the
 * log is set up (nr_boot_start). */

static void note(nr_opts_t *o, const nr_cli_opt_t *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(nr_opts_t *o, const nr_cli_opt_t *f, const char *fmt, ...)
{
    for (size_t i = 0; i < o->n_notes; i++)
        if (o->notes[i].flag == f->name)
            return;
    va_list ap;
    va_start(ap, fmt);
    char *text = nr_vasprintf(fmt, ap);
    va_end(ap);
    o->notes = nr_realloc(o->notes, (o->n_notes + 1) * sizeof(*o->notes));
    o->notes[o->n_notes++] = (nr_opts_note_t){f->name, text};
}

/* Each flag's line: why it has no effect here. */
static const struct {
    const char *flag, *why;
} no_effect[] = {
    {"pinned-memory-pool-byte-size",
     "nereid keeps no pinned memory pool: no tensor is staged for a GPU by the server (ONNX "
     "Runtime's CUDA and TensorRT providers copy inputs themselves)"},
    {"cuda-memory-pool-byte-size",
     "nereid keeps no CUDA memory pool: ONNX Runtime's CUDA and TensorRT providers allocate "
     "device memory themselves"},
    {"cuda-virtual-address-size",
     "nereid has no implicit state (sequence batcher) to grow in CUDA virtual memory"},
    {"enable-peer-access", "nereid copies no tensor between GPUs"},
    {"min-supported-compute-capability",
     "nereid does not filter GPUs by compute capability (ONNX Runtime's CUDA provider "
     "refuses a device it cannot use)"},
    {"model-load-gpu-limit", "nereid does not check GPU memory use before a load"},
    {"buffer-manager-thread-count",
     "nereid starts no copy threads: a request's tensors are copied on its own thread"},
    {"allow-sagemaker", "nereid serves no SageMaker endpoints (KServe v2 HTTP and gRPC only)"},
    {"sagemaker-port", "nereid serves no SageMaker endpoints (KServe v2 HTTP and gRPC only)"},
    {"sagemaker-safe-port-range",
     "nereid serves no SageMaker endpoints (KServe v2 HTTP and gRPC only)"},
    {"sagemaker-thread-count",
     "nereid serves no SageMaker endpoints (KServe v2 HTTP and gRPC only)"},
    {"allow-vertex-ai", "nereid serves no Vertex AI endpoints (KServe v2 HTTP and gRPC only)"},
    {"vertex-ai-port", "nereid serves no Vertex AI endpoints (KServe v2 HTTP and gRPC only)"},
    {"vertex-ai-thread-count",
     "nereid serves no Vertex AI endpoints (KServe v2 HTTP and gRPC only)"},
    {"vertex-ai-default-model",
     "nereid serves no Vertex AI endpoints (KServe v2 HTTP and gRPC only)"},
    {"repoagent-directory",
     "nereid loads no repository agents (a model naming one in model_repository_agents "
     "loads without it)"},
    {"cache-directory",
     "nereid's response cache (--cache-config=local,size=<bytes>) is built in: no cache "
     "library is loaded"},
};

static void note_no_effect(nr_opts_t *o, const nr_cli_opt_t *f, const char *v)
{
    for (size_t i = 0; i < sizeof(no_effect) / sizeof(no_effect[0]); i++)
        if (!strcmp(no_effect[i].flag, f->name)) {
            note(o, f, "--%s=%s has no effect: %s", f->name, v, no_effect[i].why);
            return;
        }
    NR_DEBUG_ASSERT(!"every flag with no effect has its line");
}

/* A flag whose value is checked and then has no effect (any value). */
static nr_status_t *no_effect_any(void *o, const nr_cli_opt_t *f, const char *v)
{
    note_no_effect(o, f, v);
    return NULL;
}

/* An integer value, checked as Triton's int flags are; noted always, or only above 0 (a count
 * of threads that asks for none at 0). */
static nr_status_t *int_then_note(void *o, const nr_cli_opt_t *f, const char *v, bool always)
{
    long long n;
    if (!nr_cli_int(v, INT_MIN, INT_MAX, &n))
        return nr_cli_bad_value(v);
    if (always || n > 0)
        note_no_effect(o, f, v);
    return NULL;
}

static nr_status_t *no_effect_int(void *o, const nr_cli_opt_t *f, const char *v)
{
    return int_then_note(o, f, v, true);
}

static nr_status_t *no_effect_if_positive(void *o, const nr_cli_opt_t *f, const char *v)
{
    return int_then_note(o, f, v, false);
}

/* A boolean flag whose true asks for what nereid does not do; false is what nereid does. */
static nr_status_t *no_effect_if_true(void *o, const nr_cli_opt_t *f, const char *v)
{
    bool b;
    if (!nr_cli_bool(v, &b))
        return nr_cli_bad_value(v);
    if (b)
        note_no_effect(o, f, v);
    return NULL;
}

/* "<a><sep><b>": whether the integer a is in [lo, hi] and b passes `second` (*rest: b). */
static bool pair_ok(const char *v, char sep, long long lo, long long hi,
                    bool (*second)(const char *b, long long lo, long long hi), const char **rest)
{
    const char *at = strchr(v, sep);
    *rest = at;
    if (at == NULL)
        return false;
    long long n;
    char *a = nr_strndup(v, (size_t)(at - v));
    bool ok = nr_cli_int(a, lo, hi, &n) && second(at + 1, lo, hi);
    free(a);
    return ok;
}

static bool is_number(const char *b, long long lo, long long hi)
{
    double x;
    return nr_cli_double(b, 0, &x);
}

static bool is_int(const char *b, long long lo, long long hi)
{
    long long n;
    return nr_cli_int(b, lo, hi, &n);
}

/* <int>:<number> (a GPU device and a size or fraction), Triton's form for the CUDA flags. */
static nr_status_t *no_effect_device_pair(void *o, const nr_cli_opt_t *f, const char *v)
{
    const char *colon;
    bool ok = pair_ok(v, ':', 0, INT_MAX, is_number, &colon);
    if (colon == NULL)
        return nr_status_new(NR_INVALID_ARG, "--%s must be of the form <device>:<value>, got "
                                             "'%s'", f->name, v);
    if (!ok)
        return nr_cli_bad_value(v);
    note_no_effect(o, f, v);
    return NULL;
}

static nr_status_t *no_effect_double(void *o, const nr_cli_opt_t *f, const char *v)
{
    double x;
    if (!nr_cli_double(v, 0, &x))
        return nr_cli_bad_value(v);
    note_no_effect(o, f, v);
    return NULL;
}

/* --http-header-forward-pattern, --grpc-header-forward-pattern: a pattern the frontend can
 * compile (core/headers.h), refused here rather than after the models have loaded. */
static nr_status_t *set_forward_pattern(void *o, const nr_cli_opt_t *f, const char *v)
{
    nr_header_fwd_t *fwd;
    nr_status_t *st = nr_header_fwd_new(f->name, v, &fwd);
    if (st != NULL)
        return st;
    nr_header_fwd_free(fwd);
    nr_opts_t *op = o;
    if (f->name[0] == 'h')
        op->http_header_forward = v;
    else
        op->grpc.header_forward = v;
    return NULL;
}

/* --cache-config=local,size=<bytes> (core/cache.h; process-wide) */
static nr_status_t *set_cache_config(void *o, const nr_cli_opt_t *f, const char *v)
{
    ((nr_opts_t *)o)->given.cache_config = true;
    return nr_cache_config(v);
}

/* --response-cache-byte-size=<int>: Triton's deprecated form of the local cache's size */
static nr_status_t *set_cache_byte_size(void *o, const nr_cli_opt_t *f, const char *v)
{
    uint64_t n;
    if (!nr_cli_u64(v, &n))
        return nr_cli_bad_value(v);
    ((nr_opts_t *)o)->given.cache_byte_size = true;
    fprintf(stderr, "Warning: '--response-cache-byte-size' has been deprecated! This will "
                    "default to the 'local' cache implementation with the provided byte size "
                    "for its config. Please use '--cache-config' instead. The equivalent "
                    "--cache-config CLI args would be: '--cache-config=local,size=%s'\n", v);
    char spec[64];
    snprintf(spec, sizeof(spec), "local,size=%" PRIu64, n);
    return nr_cache_config(spec);
}

/* --rate-limit=execution_count|off (core/rate_limit.h; process-wide, as host policies) */
static nr_status_t *set_rate_limit(void *o, const nr_cli_opt_t *f, const char *v)
{
    if (strcmp(v, "off") && strcmp(v, "execution_count"))
        return nr_status_new(NR_INVALID_ARG, "invalid argument for --rate-limit");
    nr_rl_set_enabled(!strcmp(v, "execution_count"));
    return NULL;
}

/* --rate-limit-resource=<name>:<count>[:<device>] */
static nr_status_t *add_rate_limit_resource(void *o, const nr_cli_opt_t *f, const char *v)
{
    return nr_rl_add_resource(v);
}

/* ---- tracing (core/trace.h): Triton's --trace-config and its deprecated --trace-* flags ---- */

/* Triton's ParseTraceLevelOption: the level's bits (0: off), or -1. */
static int trace_level_of(const char *v)
{
    static const struct {
        const char *word;
        int level;
    } words[] = {{"false", 0}, {"off", 0}, {"true", NR_TRACE_TIMESTAMPS},
                 {"on", NR_TRACE_TIMESTAMPS}, {"min", NR_TRACE_TIMESTAMPS},
                 {"max", NR_TRACE_TIMESTAMPS}, {"timestamps", NR_TRACE_TIMESTAMPS},
                 {"tensors", NR_TRACE_TENSORS}};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (!strcasecmp(v, words[i].word))
            return words[i].level;
    return -1;
}

static char *lowered(const char *v, size_t n)
{
    char *l = nr_strndup(v, n);
    for (char *p = l; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    return l;
}

/* A level (OR'ed into the options' level; off remembered: it wins at the end). */
static nr_status_t *trace_level(nr_opts_t *o, const char *v)
{
    int level = trace_level_of(v);
    if (level < 0) {
        char *l = lowered(v, strlen(v));
        nr_status_t *st = nr_status_new(NR_INVALID_ARG, "invalid value for trace level option: "
                                        "%s", l);
        free(l);
        return st;
    }
    if (level == 0)
        o->given.trace_off = true;
    o->trace.level |= (unsigned)level;
    return NULL;
}

/* Triton's ParseTraceModeOption on v[0, n). */
static nr_status_t *trace_mode(const char *v, size_t n, nr_trace_mode_t *mode)
{
    char *l = lowered(v, n);
    nr_status_t *st = NULL;
    if (!strcmp(l, "triton"))
        *mode = NR_TRACE_MODE_TRITON;
    else if (!strcmp(l, "opentelemetry"))
        *mode = NR_TRACE_MODE_OPENTELEMETRY;
    else
        st = nr_status_new(NR_INVALID_ARG, "invalid value for trace mode option: %s. Available "
                           "options are \"triton\" and \"opentelemetry\"", l);
    free(l);
    return st;
}

static nr_status_t *trace_int(const char *v, int32_t *out)
{
    long long n;
    if (!nr_cli_int(v, INT_MIN, INT_MAX, &n))
        return nr_cli_bad_value(v);
    *out = (int32_t)n;
    return NULL;
}

/* --trace-file, --trace-level, --trace-rate, --trace-count, --trace-log-frequency */
static nr_status_t *set_trace_deprecated(void *o, const nr_cli_opt_t *f, const char *v)
{
    static const struct {
        const char *flag, *use;
    } uses[] = {{"trace-file", "triton,file=<filepath>"},
                {"trace-level", "level=<OFF|TIMESTAMPS|TENSORS>"},
                {"trace-rate", "rate=<rate value>"},
                {"trace-count", "count=<count value>"},
                {"trace-log-frequency", "triton,log-frequency=<log frequency value>"}};
    size_t i = 0;
    while (strcmp(uses[i].flag, f->name))
        i++;
    fprintf(stderr, "Warning: '--%s' has been deprecated and will be removed in future releases. "
                    "Please use '--trace-config %s instead.\n", f->name, uses[i].use);
    nr_opts_t *op = o;
    int32_t n = 0;
    nr_status_t *st = NULL;
    switch (i) {
    case 0:
        op->trace.file = v;
        op->given.trace_file = true;
        break;
    case 1:
        st = trace_level(op, v);
        op->given.trace_level = true;
        break;
    case 2:
        if ((st = trace_int(v, &n)) == NULL)
            op->trace.rate = (uint32_t)n;
        op->given.trace_rate = true;
        break;
    case 3:
        if ((st = trace_int(v, &n)) == NULL)
            op->trace.count = n;
        op->given.trace_count = true;
        break;
    default:
        if ((st = trace_int(v, &n)) == NULL)
            op->trace.log_frequency = (uint32_t)n;
        op->given.trace_log_frequency = true;
        break;
    }
    return st;
}

/* --trace-config [<mode>,]<setting>=<value>: its form checked now (Triton's
 * ParseTraceConfigOption), applied by nr_opts_finish over the deprecated flags. */
static nr_status_t *add_trace_config(void *o, const nr_cli_opt_t *f, const char *v)
{
    const char *comma = strchr(v, ','), *setting = comma ? comma + 1 : v;
    const char *eq = strchr(setting, '=');
    if (comma == v)
        return nr_status_new(NR_INVALID_ARG, "No trace mode specified. --trace-config option "
                             "format is <trace mode>,<setting>=<value> or <setting>=<value>. "
                             "Got %s\n", v);
    nr_trace_mode_t mode;
    nr_status_t *st = comma ? trace_mode(v, (size_t)(comma - v), &mode) : NULL;
    if (st != NULL)
        return st;
    if (eq == NULL || eq == setting || eq[1] == '\0')
        return nr_status_new(NR_INVALID_ARG, "--trace-config option format is '<trace mode>,"
                             "<setting>=<value>'. Got %s\n", v);
    nr_opts_t *op = o;
    op->given.trace_config = nr_grow(op->given.trace_config, op->given.n_trace_config,
                                     sizeof(char *));
    op->given.trace_config[op->given.n_trace_config++] = v;
    return NULL;
}

/* The --trace-config settings of one mode ("": the global ones) in order: fn(o, setting,
 * value) for each; fn's error is Triton's "Bad option: "--trace-config [<mode>,]<setting>"." */
static nr_status_t *each_trace_config(nr_opts_t *o, const char *mode,
                                      nr_status_t *(*fn)(nr_opts_t *o, const char *setting,
                                                         const char *value))
{
    for (size_t i = 0; i < o->given.n_trace_config; i++) {
        const char *v = o->given.trace_config[i], *comma = strchr(v, ',');
        const char *setting = comma ? comma + 1 : v, *eq = strchr(setting, '=');
        char *m = comma ? lowered(v, (size_t)(comma - v)) : nr_strdup("");
        bool mine = !strcmp(m, mode);
        free(m);
        if (!mine)
            continue;
        char *name = nr_strndup(setting, (size_t)(eq - setting));
        nr_status_t *st = fn(o, name, eq + 1);
        if (st != NULL) {
            nr_status_t *w = nr_status_new(NR_INVALID_ARG, "Bad option: \"--trace-config %s%s%s"
                                           "\".\n%s\n", mode, mode[0] ? "," : "", name,
                                           st->msg);
            nr_status_free(st);
            free(name);
            return w;
        }
        free(name);
    }
    return NULL;
}

static void overriding(bool deprecated_given, const char *flag, const char *what)
{
    if (deprecated_given)
        fprintf(stderr, "Warning: Overriding deprecated '--%s' in favor of provided %s in "
                        "--trace-config!\n", flag, what);
}

static nr_status_t *global_trace_setting(nr_opts_t *o, const char *setting, const char *value)
{
    int32_t n = 0;
    nr_status_t *st = NULL;
    if (!strcmp(setting, "rate")) {
        overriding(o->given.trace_rate, "trace-rate", "rate value");
        if ((st = trace_int(value, &n)) == NULL)
            o->trace.rate = (uint32_t)n;
    } else if (!strcmp(setting, "level")) {
        overriding(o->given.trace_level, "trace-level", "level");
        st = trace_level(o, value);
    } else if (!strcmp(setting, "mode")) {
        st = trace_mode(value, strlen(value), &o->trace.mode);
    } else if (!strcmp(setting, "count")) {
        overriding(o->given.trace_count, "trace-count", "count");
        if ((st = trace_int(value, &n)) == NULL)
            o->trace.count = n;
    }
    return st; /* (Triton ignores other settings) */
}

static nr_status_t *triton_trace_setting(nr_opts_t *o, const char *setting, const char *value)
{
    int32_t n = 0;
    nr_status_t *st = NULL;
    if (!strcmp(setting, "file")) {
        overriding(o->given.trace_file, "trace-file", "file");
        o->trace.file = value;
    } else if (!strcmp(setting, "log-frequency")) {
        overriding(o->given.trace_log_frequency, "trace-log-frequency", "log-frequency");
        if ((st = trace_int(value, &n)) == NULL)
            o->trace.log_frequency = (uint32_t)n;
    }
    return st;
}

static const char *const bsp_settings[3] = {"bsp_max_queue_size", "bsp_schedule_delay",
                                             "bsp_max_export_batch_size"};

static bool is_u32(const char *v)
{
    uint64_t n;
    return nr_cli_u64(v, &n) && n <= UINT32_MAX;
}

static void add_otel(nr_opts_t *o, const char *kv)
{
    o->given.trace_otel = nr_grow(o->given.trace_otel, o->given.n_trace_otel, sizeof(char *));
    o->given.trace_otel[o->given.n_trace_otel++] = kv;
}

/* Mode opentelemetry's settings, kept in order for the exporter (core/otlp.h) and the settings
 * the trace extension lists; the batch span processor's values are Triton's uint32. */
static nr_status_t *otel_trace_setting(nr_opts_t *o, const char *setting, const char *value)
{
    if (!strncmp(setting, "bsp_", 4) && !is_u32(value))
        return nr_cli_bad_value(value);
    add_otel(o, value - strlen(setting) - 1); /* "<setting>=<value>" in the flag's own text */
    return NULL;
}

/* The batch span processor's settings not given: from OTEL_BSP_* or OpenTelemetry's defaults,
 * as Triton's ProcessOpenTelemetryBatchSpanProcessorArgs fills them in. */
static nr_status_t *otel_defaults(nr_opts_t *o)
{
    static const char *const env[3] = {"OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_SCHEDULE_DELAY",
                                       "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"};
    static const char *const dflt[3] = {"2048", "5000", "512"};
    for (size_t k = 0; k < 3; k++) {
        size_t len = strlen(bsp_settings[k]);
        bool given = false;
        for (size_t i = 0; i < o->given.n_trace_otel && !given; i++)
            given = !strncmp(o->given.trace_otel[i], bsp_settings[k], len) &&
                    o->given.trace_otel[i][len] == '=';
        if (given)
            continue;
        const char *v = getenv(env[k]);
        if (v == NULL)
            v = dflt[k];
        if (!is_u32(v))
            return nr_status_new(NR_INVALID_ARG, "Bad option: \"%s\".\nInvalid option value. "
                                 "Got %s\n", env[k], v);
        free(o->given.trace_otel_owned[k]);
        o->given.trace_otel_owned[k] = nr_asprintf("%s=%s", bsp_settings[k], v);
        add_otel(o, o->given.trace_otel_owned[k]);
    }
    return NULL;
}

static nr_status_t *trace_finish(nr_opts_t *o)
{
    nr_status_t *st = each_trace_config(o, "", global_trace_setting);
    if (st == NULL && o->trace.mode == NR_TRACE_MODE_OPENTELEMETRY) {
        if (o->given.trace_file)
            fprintf(stderr, "Warning: '--trace-file' is deprecated and will be ignored with "
                            "opentelemetry tracing mode. \n");
        if (o->given.trace_log_frequency)
            fprintf(stderr, "Warning: '--trace-log-frequency' is deprecated and will be ignored "
                            "with opentelemetry tracing mode.\n");
        st = each_trace_config(o, "opentelemetry", otel_trace_setting);
        if (st == NULL)
            st = otel_defaults(o);
        o->trace.otel = o->given.trace_otel;
        o->trace.n_otel = o->given.n_trace_otel;
    } else if (st == NULL) {
        st = each_trace_config(o, "triton", triton_trace_setting);
    }
    if (o->given.trace_off)
        o->trace.level = 0;
    return st;
}

/* --sagemaker-safe-port-range=<int>-<int> */
static nr_status_t *no_effect_port_range(void *o, const nr_cli_opt_t *f, const char *v)
{
    const char *dash;
    if (!pair_ok(v, '-', 0, 65535, is_int, &dash))
        return nr_cli_bad_value(v);
    note_no_effect(o, f, v);
    return NULL;
}

static nr_status_t *set_control_mode(void *o, const nr_cli_opt_t *f, const char *v)
{
    if (strcmp(v, "none") && strcmp(v, "poll") && strcmp(v, "explicit"))
        return nr_cli_bad_value(v);
    ((nr_opts_t *)o)->control_mode = v;
    return NULL;
}

static nr_status_t *set_log_format(void *o, const nr_cli_opt_t *f, const char *v)
{
    if (strcmp(v, "default") && strcmp(v, "ISO8601"))
        return nr_cli_bad_value(v);
    nr_log_settings.iso8601 = !strcmp(v, "ISO8601");
    return NULL;
}

static nr_status_t *set_metrics_config(void *o, const nr_cli_opt_t *f, const char *v)
{
    nr_status_t *st = nr_metrics_config_set(&((nr_opts_t *)o)->metrics, v);
    if (st == NULL)
        return NULL;
    nr_status_t *w = nr_status_new(NR_INVALID_ARG, "%s\n", st->msg);
    nr_status_free(st);
    return w;
}

static nr_status_t *set_backend_directory(void *o, const nr_cli_opt_t *f, const char *v)
{
    nr_backend_set_directory(v);
    return NULL;
}

static nr_status_t *add_backend_config(void *o, const nr_cli_opt_t *f, const char *v)
{
    return nr_backend_config_add(v);
}

/* Host policies are process-wide (core/host_policy.c): every server of the process sees them. */
static nr_status_t *add_host_policy(void *o, const nr_cli_opt_t *f, const char *v)
{
    bool usage = false;
    nr_status_t *st = nr_host_policy_add(v, &usage);
    if (st == NULL)
        return NULL;
    nr_status_t *w;
    if (usage) /* Triton's option error: the usage text, then what is wrong */
        w = nr_status_new(NR_UNKNOWN, "%s", st->msg);
    else if (st->code == NR_UNSUPPORTED)
        w = nr_status_new(NR_UNAVAILABLE,
                          "Failed to build Triton option:\nerror: setting host policy: %s - %s",
                          nr_status_code_name(st->code), st->msg);
    else /* nereid checks the values at start (Triton: when an instance is created) */
        w = nr_status_new(NR_UNAVAILABLE, "error: creating server: %s - %s",
                          nr_status_code_name(st->code), st->msg);
    nr_status_free(st);
    return w;
}

/* --http-restricted-api, --grpc-restricted-protocol: "<api>[,<api>...]:<key>=<value>"
 * (core/restrict.h); gRPC's key is checked with Triton's prefix. */
static nr_status_t *add_restricted(void *o, const nr_cli_opt_t *f, const char *v)
{
    nr_opts_t *op = o;
    if (f->name[0] == 'h')
        return nr_restrict_add(&op->http_restricted, v, "");
    return nr_restrict_add(&op->grpc.restricted, v, "triton-grpc-protocol-");
}

#define INT(name, field, lo, hi, arg, help) {name, NR_CLI_INT, OPT(field), lo, hi, NULL, arg, help}
#define U64(name, field, lo, hi, arg, help) {name, NR_CLI_U64, OPT(field), lo, hi, NULL, arg, help}
#define BOOL(name, field, arg, help) {name, NR_CLI_BOOL, OPT(field), 0, 0, NULL, arg, help}
#define STR(name, field, arg, help) {name, NR_CLI_STR, OPT(field), 0, 0, NULL, arg, help}
#define FN(name, fn, arg, help) {name, NR_CLI_FN, 0, 0, 0, fn, arg, help}
#define FLAG(name, fn, help) {name, NR_CLI_FLAG, 0, 0, 0, fn, NULL, help}

static const nr_cli_opt_t flag_table[] = {
    FN("model-repository", add_repository, "=<path>",
       "Model repository (repeatable): a directory, s3://[host:port/]bucket/path\n"
       "or gs://bucket/path"),
    FN("model-store", add_repository, "=<path>", "The same as --model-repository"),
    INT("http-port", http_port, 0, 65535, "=<int>", "HTTP port (default 8000)"),
    STR("http-address", http_address, "=<addr>", "HTTP bind address (default 0.0.0.0)"),
    BOOL("reuse-http-port", http_reuse_port, "=<bool>",
         "Let other processes bind the HTTP port (default false)"),
    FN("http-header-forward-pattern", set_forward_pattern, "=<re>",
        "Headers whose names match become request parameters\n(string values)"),
    FN("http-restricted-api", add_restricted, "=<apis>:<key>=<value>",
       "Serve the API groups listed (health, metadata,\ninference, shared-memory, model-config,\n"
       "model-repository, statistics, trace, logging) only\nwith header <key>: <value>; "
       "repeatable"),
    INT("http-thread-count", http_threads, 1, 1024, "=<int>",
        "HTTP threads (default: one per CPU, at most 8)"),
    U64("http-max-input-size", http_max_input, 1, 1ll << 40, "=<int>",
        "Largest request body in bytes (default 67108864)"),
    INT("http-max-connections", http_max_conns, 0, 1 << 24, "=<int>",
        "Open HTTP connections; more get 503 (default: what\n"
        "the fd limit allows, at most 65536; 0: no limit)"),
    INT("http-idle-timeout-secs", http_idle_timeout, 0, 1 << 30, "=<int>",
        "Close connections silent this long (default 300;\n0: never)"),
    INT("http-request-timeout-secs", http_request_timeout, 0, 1 << 30, "=<int>",
        "Close a connection whose request body is not all in\n"
        "this long after its header (default 300; 0: never)"),
    U64("http-body-memory-limit", http_body_memory, 1, 1ll << 50, "=<int>",
        "Request body bytes held at once; past it 503 (default:\n"
        "a quarter of the machine's memory)"),
    BOOL("allow-http", allow_http, "=<bool>", "Serve HTTP (default true)"),
    INT("grpc-port", grpc.port, 0, 65535, "=<int>", "gRPC port (default 8001)"),
    STR("grpc-address", grpc.address, "=<addr>", "gRPC bind address (default 0.0.0.0)"),
    BOOL("allow-grpc", allow_grpc, "=<bool>", "Serve gRPC (default true)"),
    BOOL("reuse-grpc-port", grpc.reuse_port, "=<bool>",
         "Let other processes bind the gRPC port (default false)"),
    INT("grpc-infer-allocation-pool-size", grpc.infer_pool, 1, 1 << 16, "=<int>",
        "ModelInfer calls accepted ahead of clients (default 8)"),
    INT("grpc-infer-thread-count", grpc.threads, 1, 256, "=<int>",
        "gRPC threads, each serving its own calls (default 1)"),
    FN("grpc-infer-response-compression-level", set_compression, "=none|low|medium|high",
       "Compression of ModelInfer responses (default none)"),
    BOOL("grpc-use-ssl", grpc.use_ssl, "=<bool>", "TLS for gRPC"),
    BOOL("grpc-use-ssl-mutual", grpc.use_ssl_mutual, "=<bool>",
         "TLS for gRPC, clients need a certificate too"),
    STR("grpc-server-cert", grpc.server_cert, "=<pem>", "The server's certificate (TLS)"),
    STR("grpc-server-key", grpc.server_key, "=<pem>", "The server's key (TLS)"),
    STR("grpc-root-cert", grpc.root_cert, "=<pem>", "The clients' root certificate (mutual TLS)"),
    INT("grpc-keepalive-time", grpc.keepalive_time_ms, 0, INT_MAX, "=<ms>",
        "gRPC keepalive and HTTP/2 settings (Triton's defaults)"),
    INT("grpc-keepalive-timeout", grpc.keepalive_timeout_ms, 0, INT_MAX, "=<ms>", ""),
    BOOL("grpc-keepalive-permit-without-calls", grpc.keepalive_permit_without_calls, "=<bool>",
         ""),
    INT("grpc-http2-max-pings-without-data", grpc.http2_max_pings_without_data, 0, INT_MAX,
        "=<int>", ""),
    INT("grpc-http2-min-recv-ping-interval-without-data", grpc.http2_min_recv_ping_interval_ms,
        0, INT_MAX, "=<ms>", ""),
    INT("grpc-http2-max-ping-strikes", grpc.http2_max_ping_strikes, 0, INT_MAX, "=<int>", ""),
    INT("grpc-max-connection-age", grpc.max_connection_age_ms, 0, INT_MAX, "=<ms>", ""),
    INT("grpc-max-connection-age-grace", grpc.max_connection_age_grace_ms, 0, INT_MAX, "=<ms>",
        ""),
    FN("grpc-header-forward-pattern", set_forward_pattern, "=<re>",
        "Headers whose names match become request parameters\n(string values)"),
    FN("grpc-restricted-protocol", add_restricted, "=<protocols>:<key>=<value>",
       "The same for gRPC (header triton-grpc-protocol-<key>)"),
    FLAG("disable-auto-complete-config", set_no_autocomplete,
         "Require complete config.pbtxt files"),
    FN("strict-model-config", set_strict_model_config, "=<bool>",
       "Deprecated: use --disable-auto-complete-config"),
    STR("model-config-name", model_config_name, "=<name>",
        "Use <model>/configs/<name>.pbtxt when present"),
    BOOL("exit-on-error", exit_on_error, "=<bool>",
         "Exit if any model fails to load (default true)"),
    BOOL("strict-readiness", strict_readiness, "=<bool>",
         "Ready only when every model is ready (default true)"),
    INT("exit-timeout-secs", exit_timeout_secs, 0, 1 << 30, "=<int>",
        "Seconds to wait for in-flight requests at exit\n(default 30)"),
    INT("drain-quiet-ms", drain_quiet_ms, 0, 600000, "=<ms>",
        "After SIGTERM, serving goes on until no inference\n"
        "request arrived for this long (default 1000), so a\n"
        "load balancer stops sending before the listeners close"),
    FN("model-control-mode", set_control_mode, "=none|poll|explicit",
       "none: load every model at start, fixed after;\n"
       "poll: follow the repository's changes; explicit:\n"
       "load/unload through the repository API (default none)"),
    INT("repository-poll-secs", poll_secs, 0, INT_MAX, "=<int>",
        "Seconds between polls in poll mode (default 15)"),
    FN("load-model", add_load_model, "=<name>",
       "Explicit mode: load at start (repeatable; * alone: all)"),
    INT("model-load-retry-count", model_load_retries, 0, INT_MAX, "=<int>",
        "Tries more for a model version that fails to load\n(default 0)"),
    STR("id", id, "=<string>", "Server identifier (default triton)"),
    BOOL("inline-execution", inline_execution, "=<bool>",
         "nereid: run a request on its HTTP/gRPC thread when an\n"
         "instance is idle, nothing is queued and the model is\n"
         "quick (default true)"),
    INT("log-verbose", log_verbose, 0, 1 << 20, "=<int>", "Verbose log level (default 0)"),
    BOOL("log-info", log_info, "=<bool>", "Info log lines (default true)"),
    BOOL("log-warning", log_warn, "=<bool>", "Warning log lines (default true)"),
    BOOL("log-error", log_error, "=<bool>", "Error log lines (default true)"),
    FN("log-format", set_log_format, "=default|ISO8601", "Log line format"),
    STR("log-file", log_file, "=<path>", "Write the log to a file"),
    BOOL("allow-metrics", allow_metrics, "=<bool>", "Serve Prometheus metrics (default true)"),
    BOOL("allow-cpu-metrics", metrics.cpu, "=<bool>",
         "CPU utilization and memory metrics (default true)"),
    BOOL("allow-gpu-metrics", allow_gpu_metrics, "=<bool>",
         "Accepted; no GPU metrics without GPUs (default true)"),
    INT("metrics-port", metrics.port, 0, 65535, "=<int>", "Metrics port (default 8002)"),
    STR("metrics-address", metrics.address, "=<addr>",
        "Metrics bind address (default: the HTTP address)"),
    INT("metrics-interval-ms", metrics.interval_ms, 0, INT_MAX, "=<int>",
        "How often CPU metrics are polled (default 2000)"),
    FN("metrics-config", set_metrics_config, " <setting>=<value>",
       "summary_latencies=true, summary_quantiles=<q>:<e>,...,\n"
       "counter_latencies=false (repeatable)"),
    FN("host-policy", add_host_policy, "=<name>,<setting>=<value>",
       "Settings numa-node=<id>, cpu-cores=<list> (0-3,8-11) for\n"
       "the instances of that policy (instance_group host_policy;\n"
       "default names cpu, gpu_<id>, model); repeatable"),
    FN("backend-directory", set_backend_directory, "=<dir>",
       "Use <dir>/onnxruntime/libonnxruntime.so when there, e.g.\n"
       "the onnxruntime-gpu build (default: the one make setup\n"
       "installed; docs/optimization.md)"),
    FN("backend-config", add_backend_config, "=<backend>,<setting>=<value>",
       "A backend's setting (python: shm-default-byte-size,\n"
       "shm-growth-byte-size, stub-timeout-seconds); repeatable"),
    FN("cache-directory", no_effect_any, "=<dir>", ""),
    /* accepted with a line saying what is not done (no_effect[]) */
    FN("cache-config", set_cache_config, "=local,size=<bytes>",
       "The response cache's size (models with response_cache\n{ enable: true } use it)"),
    FN("response-cache-byte-size", set_cache_byte_size, "=<int>",
       "Deprecated: --cache-config=local,size=<int>"),
    FN("rate-limit", set_rate_limit, "=execution_count|off",
       "off (default); execution_count: instances run only\n"
       "with the resources their rate_limiter names"),
    FN("rate-limit-resource", add_rate_limit_resource, "=<name>:<count>[:<device>]",
       "A resource's count (default: the most any instance\nasks for); repeatable"),
    FN("trace-config", add_trace_config, "=[<mode>,]<setting>=<value>",
       "Tracing: level=OFF|TIMESTAMPS|TENSORS, rate=<n> (every\n"
       "n-th request), count=<n> (-1: no limit),\n"
       "mode=triton|opentelemetry; triton,file=<path>,\n"
       "triton,log-frequency=<n>; opentelemetry,url=<url>,\n"
       "opentelemetry,resource=<k>=<v>, opentelemetry,bsp_*=<n>;\n"
       "repeatable"),
    FN("trace-file", set_trace_deprecated, "=<path>", "Deprecated: --trace-config triton,file="),
    FN("trace-level", set_trace_deprecated, "=<level>", "Deprecated: --trace-config level="),
    FN("trace-rate", set_trace_deprecated, "=<int>", "Deprecated: --trace-config rate="),
    FN("trace-count", set_trace_deprecated, "=<int>", "Deprecated: --trace-config count="),
    FN("trace-log-frequency", set_trace_deprecated, "=<int>",
       "Deprecated: --trace-config triton,log-frequency="),
    INT("model-load-thread-count", model_load_threads, 1, 1024, "=<int>",
        "Models whose sessions and instances are made at once at\n"
        "startup (default 4)"),
    BOOL("model-namespacing", model_namespacing, "=<bool>",
         "Each repository path its own namespace: a model name\n"
         "may be in several; an ensemble uses the models of its own\n"
         "(default false)"),
    FN("buffer-manager-thread-count", no_effect_if_positive, "=<int>", ""),
    FN("pinned-memory-pool-byte-size", no_effect_any, "=<int>",
       "GPU memory flags: accepted with a warning (nereid keeps\n"
       "no memory pools; ONNX Runtime's providers do)"),
    FN("cuda-memory-pool-byte-size", no_effect_device_pair, "=<device>:<int>", ""),
    FN("cuda-virtual-address-size", no_effect_device_pair, "=<device>:<int>", ""),
    FN("enable-peer-access", no_effect_if_true, "=<bool>", ""),
    FN("min-supported-compute-capability", no_effect_double, "=<float>", ""),
    FN("model-load-gpu-limit", no_effect_device_pair, "=<device>:<fraction>", ""),
    FN("allow-sagemaker", no_effect_if_true, "=<bool>",
       "SageMaker and Vertex AI flags: accepted with a warning\n(no such endpoints)"),
    FN("sagemaker-port", no_effect_int, "=<int>", ""),
    FN("sagemaker-safe-port-range", no_effect_port_range, "=<int>-<int>", ""),
    FN("sagemaker-thread-count", no_effect_int, "=<int>", ""),
    FN("allow-vertex-ai", no_effect_if_true, "=<bool>", ""),
    FN("vertex-ai-port", no_effect_int, "=<int>", ""),
    FN("vertex-ai-thread-count", no_effect_int, "=<int>", ""),
    FN("vertex-ai-default-model", no_effect_any, "=<name>", ""),
    FN("repoagent-directory", no_effect_any, "=<dir>", "Accepted with a warning: no agents"),
    FLAG("help", NULL, "This text"),
};

const nr_cli_opt_t *nr_opts_flags(size_t *n)
{
    *n = sizeof(flag_table) / sizeof(flag_table[0]);
    return flag_table;
}

void nr_opts_usage(FILE *f)
{
    fputs("Usage: nereid [options]\n", f);
    nr_cli_usage(f, flag_table, sizeof(flag_table) / sizeof(flag_table[0]));
}

nr_status_t *nr_opts_set(nr_opts_t *o, const char *name, size_t len, const char *value)
{
    size_t n;
    const nr_cli_opt_t *t = nr_opts_flags(&n);
    const nr_cli_opt_t *f = nr_cli_find(t, n, name, len);
    if (f == NULL)
        return nr_status_new(NR_NOT_FOUND, "unrecognized option '--%.*s'", (int)len, name);
    return nr_cli_set(f, o, value);
}

void nr_opts_init(nr_opts_t *o)
{
    *o = (nr_opts_t){
        .http_address = "0.0.0.0",
        .http_port = 8000,
        .http_threads = 0, /* one per CPU, at most Triton's 8: nr_boot_start */
        .http_max_input = NR_DEFAULT_HTTP_MAX_INPUT,
        .http_max_conns = -1,
        .http_idle_timeout = 300,
        .http_request_timeout = 300,
        .autocomplete = true,
        .exit_on_error = true,
        .strict_readiness = true,
        .allow_http = true,
        .allow_grpc = true,
        .inline_execution = true,
        .exit_timeout_secs = 30,
        .drain_quiet_ms = 1000,
        .id = "triton",
        .control_mode = "none",
        .poll_secs = 15,
        .model_load_threads = 4, /* Triton's default */
        .given = {.strict_model_config = -1},
        .trace = {.rate = 1000, .count = -1, .file = "", .mode = NR_TRACE_MODE_TRITON},
        .log_info = true,
        .log_warn = true,
        .log_error = true,
        .allow_metrics = true,
        .allow_gpu_metrics = true,
    };
    nr_grpc_options_default(&o->grpc);
    nr_metrics_options_default(&o->metrics);
}

nr_status_t *nr_opts_finish(nr_opts_t *o)
{
    if (o->given.no_autocomplete) { /* Triton: it wins over the deprecated flag, in any order */
        if (o->given.strict_model_config == 0)
            fprintf(stderr, "Warning: Overriding deprecated '--strict-model-config' from False "
                            "to True in favor of '--disable-auto-complete-config'!\n");
        o->autocomplete = false;
    }
    nr_status_t *st = trace_finish(o);
    if (st != NULL)
        return st;
    if (o->given.cache_byte_size && o->given.cache_config)
        return nr_status_new(NR_INVALID_ARG, "Error: Incompatible flags "
                             "--response-cache-byte-size and --cache-config both provided. "
                             "Please provide one or the other.");
    return NULL;
}

void nr_opts_free(nr_opts_t *o)
{
    for (size_t i = 0; i < o->n_notes; i++)
        free(o->notes[i].text);
    free(o->notes);
    o->notes = NULL;
    o->n_notes = 0;
    nr_restrict_free(&o->http_restricted);
    nr_restrict_free(&o->grpc.restricted);
    free(o->repos);
    free(o->load_models);
    free(o->given.trace_config);
    o->given.trace_config = NULL;
    o->given.n_trace_config = 0;
    free(o->given.trace_otel);
    o->given.trace_otel = NULL;
    o->given.n_trace_otel = 0;
    for (size_t k = 0; k < 3; k++) {
        free(o->given.trace_otel_owned[k]);
        o->given.trace_otel_owned[k] = NULL;
    }
    o->repos = NULL;
    o->load_models = NULL;
    o->n_repos = o->n_load_models = 0;
}

nr_status_t *nr_opts_apply_log(const nr_opts_t *o)
{
    nr_log_settings.info = o->log_info;
    nr_log_settings.warn = o->log_warn;
    nr_log_settings.error = o->log_error;
    nr_log_settings.verbose = o->log_verbose;
    if (o->log_file == NULL)
        return NULL;
    int fd = open(o->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return nr_status_new(NR_INVALID_ARG, "cannot open log file %s: %s", o->log_file,
                             strerror(errno));
    nr_log_settings.file = o->log_file;
    nr_log_settings.fd = fd;
    return NULL;
}
