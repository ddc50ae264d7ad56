/* analyzer_main.c - nereid-analyzer profile: flags, and each model's profile (analyzer.h).
 *
 * For each --profile-models entry: load the model as it is to read its complete config,
 * build the variants (analyzer_variant.c), measure each one that the checkpoint does not
 * already hold (analyzer_run.c), save the checkpoint after each, then choose
 * (analyzer_result.c) and write the outputs: every measured variant as a loadable folder in
 * the output model repository, the best one as <model>/, and the rows of
 * <export-path>/results/metrics-model-inference.csv.
 */
#include "analyzer.h"

#include "../../common/alloc.h"
#include "../../common/cli.h"
#include "../../proto/grpc_lib.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <ftw.h>
#include <getopt.h>
#include <grpc/grpc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AZ_EXIT_ERROR 1

static const char usage_text[] =
    "Usage: nereid-analyzer report [-e|--export-path <dir>] [--profile-models <m>[,<m>...]]\n"
    "       nereid-analyzer profile --model-repository <dir> --profile-models <m>[,<m>...]\n"
    "         [--output-model-repository-path <dir>] [--override-output-model-repository]\n"
    "         [-f|--config-file <yaml>] [-e|--export-path <dir>]\n"
    "         [-s|--checkpoint-directory <dir>]\n"
    "         [--run-config-search-mode brute|quick] [--run-config-search-disable]\n"
    "         [--run-config-search-refine openvino,queue-delay,worker-nice,\n"
    "                                     preferred-batch,pin|none]\n"
    "         [--run-config-search-min-concurrency <n>] [--run-config-search-max-concurrency <n>]\n"
    "         [--run-config-search-min-instance-count <n>]\n"
    "         [--run-config-search-max-instance-count <n>]\n"
    "         [--run-config-search-min-model-batch-size <n>]\n"
    "         [--run-config-search-max-model-batch-size <n>]\n"
    "         [--latency-budget <ms>] [--min-throughput <infer/sec>] [--max-memory <MB>]\n"
    "         [--objectives perf_throughput[:w],perf_latency_p99[:w],cpu_used_ram[:w]]\n"
    "         [-b|--batch-sizes <n>] [--client-protocol http|grpc]\n"
    "         [--triton-launch-mode local|remote] [--triton-server-path <nereid>]\n"
    "         [--triton-http-endpoint <host:port>]\n"
    "         [--measurement-interval <ms>] [--measurement-request-count <n>]\n"
    "         [--max-trials <n>] [--stability-percentage <pct>] [-v]\n"
    "         [--run-config-profile-models-concurrently-enable] [--num-configs-per-model <n>]\n"
    "Model Analyzer's flag names (docs/analyzer.md). report rebuilds the HTML reports\n"
    "(<export-path>/reports/summaries/<model>/result_summary.html) from\n"
    "<export-path>/results/<model>.json.\n"
    "-f: Model Analyzer's YAML keys for these flags, and its constraints mapping.\n"
    "--run-config-profile-models-concurrently-enable: after each model alone, combinations of\n"
    "their best variants measured with all the models loaded and under load at once.\n";

static void usage_error(const char *fmt, const char *arg)
{
    fputs(usage_text, stderr);
    fprintf(stderr, "nereid-analyzer: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(AZ_EXIT_ERROR);
}

static double parse_num(const char *flag, const char *v, double min)
{
    double x;
    if (!nr_cli_double(v, min, &x))
        usage_error("invalid value for %s", flag);
    return x;
}

static const char *const tune_names[AZ_TUNE_COUNT] = {"none", "openvino", "queue-delay",
                                                       "worker-nice", "preferred-batch", "pin"};

/* "openvino,queue-delay,worker-nice", or "none". */
static void parse_refine(az_opts_t *o, const char *v)
{
    memset(o->refine, 0, sizeof(o->refine));
    char *s = nr_strdup(v), *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < AZ_TUNE_COUNT && strcmp(t, tune_names[k]) != 0)
            k++;
        if (k == AZ_TUNE_COUNT)
            usage_error("--run-config-search-refine: unknown setting '%s' (openvino, "
                        "queue-delay, worker-nice, preferred-batch, pin or none)", t);
        o->refine[k] = true;
    }
    free(s);
    if (o->refine[AZ_TUNE_NONE])
        memset(o->refine, 0, sizeof(o->refine));
}

/* "perf_throughput:10,perf_latency_p99:5" (a name alone weighs 1). */
static void parse_objectives(az_opts_t *o, const char *v)
{
    o->w_throughput = o->w_latency = o->w_memory = 0;
    char *s = nr_strdup(v), *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        double w = 1;
        if (colon) {
            *colon = '\0';
            w = parse_num("--objectives", colon + 1, 0);
        }
        if (strcmp(t, "perf_throughput") == 0)
            o->w_throughput = w;
        else if (strcmp(t, "perf_latency_p99") == 0)
            o->w_latency = w;
        else if (strcmp(t, "cpu_used_ram") == 0)
            o->w_memory = w;
        else
            usage_error("unknown objective '%s' (perf_throughput, perf_latency_p99, "
                        "cpu_used_ram)", t);
    }
    free(s);
}

enum {
    OPT_REPO = 256, OPT_MODELS, OPT_OUT, OPT_OVERRIDE, OPT_MODE, OPT_DISABLE, OPT_MIN_CONC,
    OPT_MAX_CONC, OPT_MIN_INST, OPT_MAX_INST, OPT_MIN_MBS, OPT_MAX_MBS, OPT_LAT, OPT_THR, OPT_MEM,
    OPT_OBJ, OPT_PROTO, OPT_LAUNCH, OPT_SERVER, OPT_ENDPOINT, OPT_INTERVAL, OPT_COUNT, OPT_TRIALS,
    OPT_STAB, OPT_REFINE, OPT_TOGETHER, OPT_NUM_CONFIGS,
};

static const struct option long_opts[] = {
    {"model-repository", required_argument, NULL, 'm'},
    {"profile-models", required_argument, NULL, OPT_MODELS},
    {"output-model-repository-path", required_argument, NULL, OPT_OUT},
    {"output-model-repository", required_argument, NULL, OPT_OUT},
    {"override-output-model-repository", no_argument, NULL, OPT_OVERRIDE},
    {"export-path", required_argument, NULL, 'e'},
    {"checkpoint-directory", required_argument, NULL, 's'},
    {"run-config-search-mode", required_argument, NULL, OPT_MODE},
    {"run-config-search-disable", no_argument, NULL, OPT_DISABLE},
    {"run-config-search-min-concurrency", required_argument, NULL, OPT_MIN_CONC},
    {"run-config-search-max-concurrency", required_argument, NULL, OPT_MAX_CONC},
    {"run-config-search-min-instance-count", required_argument, NULL, OPT_MIN_INST},
    {"run-config-search-max-instance-count", required_argument, NULL, OPT_MAX_INST},
    {"run-config-search-min-model-batch-size", required_argument, NULL, OPT_MIN_MBS},
    {"run-config-search-max-model-batch-size", required_argument, NULL, OPT_MAX_MBS},
    {"latency-budget", required_argument, NULL, OPT_LAT},
    {"min-throughput", required_argument, NULL, OPT_THR},
    {"max-memory", required_argument, NULL, OPT_MEM},
    {"objectives", required_argument, NULL, OPT_OBJ},
    {"batch-sizes", required_argument, NULL, 'b'},
    {"client-protocol", required_argument, NULL, OPT_PROTO},
    {"triton-launch-mode", required_argument, NULL, OPT_LAUNCH},
    {"triton-server-path", required_argument, NULL, OPT_SERVER},
    {"triton-http-endpoint", required_argument, NULL, OPT_ENDPOINT},
    {"measurement-interval", required_argument, NULL, OPT_INTERVAL},
    {"measurement-request-count", required_argument, NULL, OPT_COUNT},
    {"max-trials", required_argument, NULL, OPT_TRIALS},
    {"stability-percentage", required_argument, NULL, OPT_STAB},
    {"run-config-search-refine", required_argument, NULL, OPT_REFINE},
    {"run-config-profile-models-concurrently-enable", no_argument, NULL, OPT_TOGETHER},
    {"num-configs-per-model", required_argument, NULL, OPT_NUM_CONFIGS},
    {"verbose", no_argument, NULL, 'v'},
    {"config-file", required_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The -f/--config-file argument, if any (before getopt, which reads the file's settings). */
static const char *config_file(int argc, char **argv)
{
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--config-file") == 0) {
            if (i + 1 == argc)
                usage_error("%s needs a file", argv[i]);
            file = argv[++i];
        } else if (strncmp(argv[i], "--config-file=", 14) == 0) {
            file = argv[i] + 14;
        } else if (strcmp(argv[i], "--") == 0) {
            break;
        }
    }
    return file;
}

static void opts_free(az_opts_t *o)
{
    for (size_t i = 0; i < o->n_models; i++)
        free(o->models[i]);
    free(o->models);
    for (size_t i = 0; i < o->n_file_args; i++)
        free(o->file_args[i]);
    free(o->file_args);
    free(o->argv);
}

static void parse_args(int argc, char **argv, az_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->export_path = ".";
    o->out_repo = "./output_model_repository";
    o->checkpoint_dir = "./checkpoints";
    o->launch_mode = "local";
    o->http_endpoint = "localhost:8000";
    o->protocol = "http";
    o->min_conc = 1;
    o->max_conc = 1024;
    o->min_inst = 1;
    o->max_inst = 5;
    o->min_mbs = 1;
    o->max_mbs = 128;
    o->batch = 1;
    o->w_throughput = 1;
    o->request_count = 50;
    o->max_trials = 10;
    o->stability = 0.10;
    o->num_configs = 3;
    for (int k = AZ_TUNE_NONE + 1; k < AZ_TUNE_COUNT; k++)
        o->refine[k] = true;
    const char *models = NULL;
    if (argc < 2 || (strcmp(argv[1], "profile") != 0 && strcmp(argv[1], "report") != 0)) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            fputs(usage_text, stdout);
            exit(0);
        }
        usage_error("expected a subcommand: profile or report%s", "");
    }
    o->report = strcmp(argv[1], "report") == 0;
    argc--;
    argv++;
    const char *file = config_file(argc, argv);
    if (file) { /* its settings first: the command line's win */
        nr_status_t *st = az_yaml_args(file, long_opts, &o->file_args, &o->n_file_args);
        if (st) {
            char msg[1024];
            snprintf(msg, sizeof(msg), "%s", st->msg);
            nr_status_free(st);
            usage_error("%s", msg);
        }
        char **all = nr_calloc((size_t)argc + o->n_file_args + 1, sizeof(*all));
        all[0] = argv[0];
        memcpy(all + 1, o->file_args, o->n_file_args * sizeof(*all));
        memcpy(all + 1 + o->n_file_args, argv + 1, (size_t)(argc - 1) * sizeof(*all));
        argc += (int)o->n_file_args;
        argv = o->argv = all;
    }
    int c;
    while ((c = getopt_long(argc, argv, "m:e:s:b:f:vh", long_opts, NULL)) != -1) {
        switch (c) {
        case 'f': break; /* read above */
        case 'm': o->repo = optarg; break;
        case OPT_MODELS: models = optarg; break;
        case OPT_OUT: o->out_repo = optarg; break;
        case OPT_OVERRIDE: o->override_out = true; break;
        case 'e': o->export_path = optarg; break;
        case 's': o->checkpoint_dir = optarg; break;
        case OPT_MODE:
            if (strcmp(optarg, "brute") == 0)
                o->quick = false;
            else if (strcmp(optarg, "quick") == 0)
                o->quick = true;
            else
                usage_error("--run-config-search-mode must be brute or quick, not '%s'", optarg);
            break;
        case OPT_DISABLE: o->search_disable = true; break;
        case OPT_MIN_CONC: o->min_conc = (uint64_t)parse_num("concurrency", optarg, 1); break;
        case OPT_MAX_CONC: o->max_conc = (uint64_t)parse_num("concurrency", optarg, 1); break;
        case OPT_MIN_INST: o->min_inst = (int)parse_num("instance count", optarg, 1); break;
        case OPT_MAX_INST: o->max_inst = (int)parse_num("instance count", optarg, 1); break;
        case OPT_MIN_MBS: o->min_mbs = (int)parse_num("model batch size", optarg, 1); break;
        case OPT_MAX_MBS: o->max_mbs = (int)parse_num("model batch size", optarg, 1); break;
        case OPT_LAT: o->latency_budget_ms = parse_num("--latency-budget", optarg, 0); break;
        case OPT_THR: o->min_throughput = parse_num("--min-throughput", optarg, 0); break;
        case OPT_MEM: o->max_memory_mb = parse_num("--max-memory", optarg, 0); break;
        case OPT_OBJ: parse_objectives(o, optarg); break;
        case 'b': o->batch = (int)parse_num("--batch-sizes", optarg, 1); break;
        case OPT_PROTO:
            if (strcmp(optarg, "http") != 0 && strcmp(optarg, "grpc") != 0)
                usage_error("--client-protocol must be http or grpc, not '%s'", optarg);
            o->protocol = optarg;
            break;
        case OPT_LAUNCH:
            if (strcmp(optarg, "local") != 0 && strcmp(optarg, "remote") != 0)
                usage_error("--triton-launch-mode must be local or remote, not '%s' (docker and "
                            "c_api are Model Analyzer's)", optarg);
            o->launch_mode = optarg;
            break;
        case OPT_SERVER: o->server_path = optarg; break;
        case OPT_ENDPOINT: o->http_endpoint = optarg; break;
        case OPT_INTERVAL:
            o->interval_ms = (uint64_t)parse_num("--measurement-interval", optarg, 1);
            break;
        case OPT_COUNT:
            o->request_count = (uint64_t)parse_num("--measurement-request-count", optarg, 1);
            break;
        case OPT_TRIALS: o->max_trials = (int)parse_num("--max-trials", optarg, 1); break;
        case OPT_STAB: o->stability = parse_num("--stability-percentage", optarg, 0) / 100; break;
        case OPT_REFINE: parse_refine(o, optarg); break;
        case OPT_TOGETHER: o->together = true; break;
        case OPT_NUM_CONFIGS:
            o->num_configs = (int)parse_num("--num-configs-per-model", optarg, 1);
            break;
        case 'v': o->verbose = true; break;
        case 'h': fputs(usage_text, stdout); exit(0);
        default: usage_error("unknown option (see above)%s", "");
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (o->report && models == NULL)
        return; /* every model with results */
    if (models == NULL || *models == '\0')
        usage_error("%s is required", "--profile-models");
    if (o->repo == NULL && strcmp(o->launch_mode, "local") == 0 && !o->report)
        usage_error("%s is required", "--model-repository");
    if (o->max_conc < o->min_conc || o->max_inst < o->min_inst || o->max_mbs < o->min_mbs)
        usage_error("a --run-config-search-max-* value is below its min-*%s", "");
    char *s = nr_strdup(models), *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->together && strcmp(t, AZ_TOGETHER) == 0)
            usage_error("a model named '%s' cannot be profiled with "
                        "--run-config-profile-models-concurrently-enable (the name of its files)",
                        t);
        o->models = nr_realloc(o->models, (o->n_models + 1) * sizeof(char *));
        o->models[o->n_models++] = nr_strdup(t);
    }
    free(s);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* Model Analyzer's rule for the output repository: a new folder unless overriding. */
static nr_status_t *prepare_out_repo(const az_opts_t *o)
{
    struct stat sb;
    if (stat(o->out_repo, &sb) == 0) {
        if (!o->override_out)
            return nr_status_new(NR_ALREADY_EXISTS, "Path \"%s\" already exists. Please set or "
                                 "modify \"--output-model-repository-path\" flag or remove this "
                                 "directory. You can also allow overriding of the output "
                                 "directory using the \"--override-output-model-repository\" "
                                 "flag.", o->out_repo);
        if (nftw(o->out_repo, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            return nr_status_new(NR_INVALID_ARG, "cannot remove %s: %s", o->out_repo,
                                 strerror(errno));
    }
    return az_mkdirs(o->out_repo);
}

static double now_s(void)
{
    return (double)perf_now_ns() / 1e9;
}

/* One model's profile in progress. */
typedef struct {
    const az_opts_t *o;
    az_server_t *s;
    const char *model, *base;
    az_variant_t *vs;
    size_t nv, cap_v;
    az_run_t *runs;
    size_t nr, cap_r;
    az_saved_run_t *saved; /* from the checkpoint */
    size_t n_saved;
    double started;
    size_t measured, planned; /* runs measured in this process; runs expected in all */
    bool server_down;         /* it ended and could not be started again */
} az_profile_t;

static void progress(az_profile_t *p, const az_variant_t *v, uint64_t c0, uint64_t c1)
{
    char desc[256], conc[64] = "";
    az_variant_describe(v, desc, sizeof(desc));
    if (c0 == c1)
        snprintf(conc, sizeof(conc), ", concurrency %llu", (unsigned long long)c0);
    size_t done = p->nr + 1, all = p->planned > done ? p->planned : done;
    double spent = now_s() - p->started;
    if (p->measured > 0)
        fprintf(stderr, "nereid-analyzer: [%zu/%zu] %s (%s%s); about %.0f s left\n", done, all,
                v->name, desc, conc, spent / (double)p->measured * (double)(all - done + 1));
    else
        fprintf(stderr, "nereid-analyzer: [%zu/%zu] %s (%s%s)\n", done, all, v->name, desc,
                conc);
}

/* The index in p->runs of variant i's run over [c0, c1]: from this profile, from the
 * checkpoint, or measured now (and the checkpoint saved). */
static size_t run_of(az_profile_t *p, size_t i, uint64_t c0, uint64_t c1)
{
    for (size_t k = 0; k < p->nr; k++)
        if (p->runs[k].variant == i && p->runs[k].min_conc == c0 && p->runs[k].max_conc == c1)
            return k;
    if (p->nr == p->cap_r) {
        p->cap_r = p->cap_r ? 2 * p->cap_r : 16;
        p->runs = nr_realloc(p->runs, p->cap_r * sizeof(*p->runs));
    }
    az_run_t *r = &p->runs[p->nr];
    for (size_t k = 0; k < p->n_saved; k++) {
        az_saved_run_t *sv = &p->saved[k];
        if (sv->config && sv->run.min_conc == c0 && sv->run.max_conc == c1 &&
            strcmp(sv->config, p->vs[i].config_json) == 0) {
            *r = sv->run; /* moved */
            r->variant = i;
            memset(&sv->run, 0, sizeof(sv->run));
            free(sv->config);
            sv->config = NULL;
            return p->nr++;
        }
    }
    if (!az_server_fresh(p->s, p->o))
        p->server_down = true;
    progress(p, &p->vs[i], c0, c1);
    if (p->server_down) {
        memset(r, 0, sizeof(*r));
        r->variant = i;
        r->min_conc = c0;
        r->max_conc = c1;
        r->load_mb = -1;
        r->error = nr_strdup("not measured: the server could not be restarted");
    } else {
        az_run_variant(p->o, p->s, p->model, &p->vs[i], i, c0, c1, r);
        az_server_check(p->s, p->o, p->vs[i].name, &r->error, &p->server_down);
    }
    if (r->error)
        fprintf(stderr, "nereid-analyzer: %s: %s\n", p->vs[i].name, r->error);
    p->nr++;
    p->measured++;
    nr_status_t *st = az_checkpoint_save(p->o, p->model, p->vs, p->runs, p->nr);
    if (st) {
        fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
        nr_status_free(st);
    }
    return p->nr - 1;
}

/* Room for one more variant at p->vs[p->nv]. */
static az_variant_t *next_variant(az_profile_t *p)
{
    if (p->nv == p->cap_v) {
        p->cap_v = p->cap_v ? 2 * p->cap_v : 16;
        p->vs = nr_realloc(p->vs, p->cap_v * sizeof(*p->vs));
    }
    return &p->vs[p->nv];
}

/* A new variant (quick search), or the index of the one with the same settings. */
static nr_status_t *variant_at(az_profile_t *p, int inst, int mbs, bool dynamic, size_t *idx)
{
    for (size_t k = 0; k < p->nv; k++)
        if (!p->vs[k].is_default && p->vs[k].instances == inst && p->vs[k].tune == AZ_TUNE_NONE &&
            p->vs[k].max_batch_size == mbs && p->vs[k].dynamic_batching == dynamic) {
            *idx = k;
            return NULL;
        }
    nr_status_t *st = az_variant_make(p->model, p->base, inst, mbs, dynamic, p->nv - 1,
                                      next_variant(p));
    if (st == NULL)
        *idx = p->nv++;
    return st;
}

/* Brute: every variant over the whole concurrency range; for each instance count, larger
 * max_batch_size values stop once one gives no more throughput than the one before (Model
 * Analyzer's rule). */
static void brute(az_profile_t *p)
{
    const az_opts_t *o = p->o;
    p->planned = p->nv;
    double prev = 0;
    int skip = 0, prev_inst = 0;
    for (size_t i = 0; i < p->nv; i++) {
        az_variant_t *v = &p->vs[i];
        if (!v->is_default && v->instances == skip) {
            p->planned--;
            continue;
        }
        size_t r = run_of(p, i, o->min_conc, o->max_conc);
        if (v->is_default || !v->dynamic_batching || p->runs[r].error) /* a failure ends nothing */
            continue;
        double peak = az_run_peak(&p->runs[r]);
        if (v->instances == prev_inst && peak <= prev)
            skip = v->instances;
        prev_inst = v->instances;
        prev = peak;
    }
}

/* Beyond Model Analyzer's search: each --run-config-search-refine setting tried on the best
 * variant found (the default's own config included), swept over the whole range. A setting
 * that the server refuses (OpenVINO missing from the ONNX Runtime it loaded) is a failed run,
 * reported and left out of the choice. */
static nr_status_t *refine(az_profile_t *p)
{
    const az_opts_t *o = p->o;
    ssize_t best = az_best_run(o, p->runs, p->nr);
    if (best < 0 || o->search_disable)
        return NULL;
    az_variant_t from = p->vs[p->runs[best].variant]; /* p->vs may move */
    for (int k = AZ_TUNE_NONE + 1; k < AZ_TUNE_COUNT; k++) {
        if (!o->refine[k])
            continue;
        nr_status_t *st = az_variant_tuned(p->model, p->base, &from, (az_tune_t)k, p->nv - 1,
                                           next_variant(p));
        if (st && st->code == NR_NOT_FOUND) { /* does not apply */
            nr_status_free(st);
            continue;
        }
        if (st)
            return st;
        p->planned = p->nr + 1 > p->planned ? p->nr + 1 : p->planned;
        run_of(p, p->nv++, o->min_conc, o->max_conc);
    }
    return NULL;
}

/* The better of two single-level runs under the constraints and objectives. */
static bool better(const az_opts_t *o, const az_run_t *a, const az_run_t *b)
{
    const az_point_t *pa = az_best_point(o, a), *pb = az_best_point(o, b);
    if (pa == NULL || pb == NULL)
        return pa != NULL;
    return az_compare(o, a, pa, b, pb) > 0;
}

/* Quick: hill climbing from (min instances, min max_batch_size), one level per variant at
 * concurrency 2 x max_batch_size x instances (Model Analyzer's), moving to the best
 * neighbour (instances +-1, max_batch_size x2 or /2) while one is better; then the default
 * and the best three variants found are swept over the whole concurrency range. */
static nr_status_t *quick(az_profile_t *p)
{
    const az_opts_t *o = p->o;
    int base_mbs;
    bool batching;
    nr_status_t *st = az_base_info(p->base, &base_mbs, &batching);
    if (st)
        return st;
    batching = batching && base_mbs > 0;
    p->planned = 8;
    run_of(p, 0, o->min_conc, o->max_conc); /* the default, swept whole */
    int inst = o->min_inst, mbs = batching ? o->min_mbs : -1;
    size_t cur;
    size_t *tried = NULL, n_tried = 0; /* the single-level runs, by index */
    for (;;) {
        if ((st = variant_at(p, inst, mbs, batching, &cur)) != NULL)
            break;
        uint64_t c = 2 * (uint64_t)inst * (uint64_t)(mbs > 0 ? mbs : 1);
        c = c < o->min_conc ? o->min_conc : c > o->max_conc ? o->max_conc : c;
        size_t best_run = run_of(p, cur, c, c);
        tried = nr_realloc(tried, (n_tried + 1) * sizeof(*tried));
        tried[n_tried++] = best_run;
        int cand[4][2] = {{inst + 1, mbs}, {inst - 1, mbs}, {inst, mbs * 2}, {inst, mbs / 2}};
        int bi = inst, bm = mbs;
        for (int k = 0; k < 4; k++) {
            int ni = cand[k][0], nm = cand[k][1];
            if (ni < o->min_inst || ni > o->max_inst)
                continue;
            if (batching ? (nm < o->min_mbs || nm > o->max_mbs) : nm != mbs)
                continue;
            size_t vi;
            if ((st = variant_at(p, ni, nm, batching, &vi)) != NULL)
                break;
            uint64_t nc = 2 * (uint64_t)ni * (uint64_t)(nm > 0 ? nm : 1);
            nc = nc < o->min_conc ? o->min_conc : nc > o->max_conc ? o->max_conc : nc;
            p->planned = p->nr + 4 > p->planned ? p->nr + 4 : p->planned;
            size_t nr = run_of(p, vi, nc, nc);
            tried = nr_realloc(tried, (n_tried + 1) * sizeof(*tried));
            tried[n_tried++] = nr;
            if (better(o, &p->runs[nr], &p->runs[best_run])) {
                best_run = nr;
                bi = ni;
                bm = nm;
            }
        }
        if (st || (bi == inst && bm == mbs))
            break;
        inst = bi;
        mbs = bm;
    }
    /* the three best variants found, swept whole */
    for (int top = 0; st == NULL && top < 3; top++) {
        ssize_t pick = -1;
        for (size_t k = 0; k < n_tried; k++)
            if (tried[k] != (size_t)-1 &&
                (pick < 0 || better(o, &p->runs[tried[k]], &p->runs[tried[pick]])))
                pick = (ssize_t)k;
        if (pick < 0 || az_best_point(o, &p->runs[tried[pick]]) == NULL)
            break;
        size_t vi = p->runs[tried[pick]].variant;
        for (size_t k = 0; k < n_tried; k++) /* one sweep per variant */
            if (tried[k] != (size_t)-1 && p->runs[tried[k]].variant == vi)
                tried[k] = (size_t)-1;
        p->planned = p->nr + 1 > p->planned ? p->nr + 1 : p->planned;
        run_of(p, vi, o->min_conc, o->max_conc);
    }
    free(tried);
    return st;
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

/* The HTML report of a results file (a model's, or the models-together one). */
static nr_status_t *write_report(const char *export_path, const char *results, char *out,
                                 size_t len)
{
    if (has_suffix(results, "/" AZ_TOGETHER ".json")) {
        az_results_t *pm;
        size_t n;
        nr_status_t *st = az_together_load(results, &pm, &n);
        if (st == NULL)
            st = az_report_together(export_path, pm, n, out, len);
        for (size_t i = 0; i < n; i++)
            az_results_free(&pm[i]);
        free(pm);
        return st;
    }
    az_results_t r;
    nr_status_t *st = az_results_load(results, &r);
    if (st == NULL)
        st = az_report_write(export_path, &r, out, len);
    az_results_free(&r);
    return st;
}

/* nereid-analyzer report: each model's report again from its results file (the models of
 * --profile-models, or every results file of the export path). */
static int run_report(const az_opts_t *o)
{
    char dir[PATH_MAX], path[PATH_MAX + 300], out[PATH_MAX + 300];
    snprintf(dir, sizeof(dir), "%s/results", o->export_path);
    char **names = NULL;
    size_t n = 0;
    if (o->n_models) {
        names = nr_calloc(o->n_models, sizeof(*names));
        for (; n < o->n_models; n++)
            names[n] = nr_asprintf("%s.json", o->models[n]);
    } else {
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d)) != NULL;)
            if (has_suffix(e->d_name, ".json")) {
                names = nr_realloc(names, (n + 1) * sizeof(*names));
                names[n++] = nr_strdup(e->d_name);
            }
        if (d)
            closedir(d);
        if (n == 0)
            fprintf(stderr, "nereid-analyzer: no results in %s (nereid-analyzer profile "
                    "writes them there)\n", dir);
    }
    int rc = n ? 0 : AZ_EXIT_ERROR;
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        nr_status_t *st = write_report(o->export_path, path, out, sizeof(out));
        if (st) {
            fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
            nr_status_free(st);
            rc = AZ_EXIT_ERROR;
        } else {
            printf("report: %s\n", out);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

/* The model's candidates for serving together: its best variants alone, best first, and its
 * default. */
static void candidates(const az_profile_t *p, az_cands_t *c)
{
    const az_opts_t *o = p->o;
    c->model = p->model;
    c->vs = nr_calloc((size_t)o->num_configs + 1, sizeof(*c->vs));
    c->n = 0;
    bool have_default = false;
    for (int k = 0; k < o->num_configs; k++) {
        ssize_t pick = -1;
        for (size_t i = 0; i < p->nr; i++) {
            const az_variant_t *v = &p->vs[p->runs[i].variant];
            bool taken = false;
            for (size_t j = 0; j < c->n; j++)
                taken |= az_variant_same(&c->vs[j], v);
            if (!taken && az_best_point(o, &p->runs[i]) != NULL &&
                (pick < 0 || better(o, &p->runs[i], &p->runs[pick])))
                pick = (ssize_t)i;
        }
        if (pick < 0)
            break;
        const az_variant_t *v = &p->vs[p->runs[pick].variant];
        have_default |= v->is_default;
        az_variant_copy(&c->vs[c->n++], v);
    }
    for (size_t i = 0; i < p->nr && !have_default; i++) /* measured, even if it failed */
        if (p->vs[p->runs[i].variant].is_default && p->runs[i].error == NULL) {
            az_variant_copy(&c->vs[c->n++], &p->vs[p->runs[i].variant]);
            have_default = true;
        }
}

/* One model's profile; false when it could not be profiled or nothing met the constraints.
 * With cands, the model's candidates for serving together (none when it failed). */
static bool profile_model(const az_opts_t *o, az_server_t *s, const char *model,
                          az_cands_t *cands)
{
    az_profile_t p = {.o = o, .s = s, .model = model, .started = now_s()};
    char *base = NULL;
    nr_status_t *st = az_server_load(s, model, NULL);
    if (st == NULL)
        st = az_server_config(s, model, &base);
    if (st == NULL)
        st = az_server_unload(s, model);
    p.base = base;
    if (st == NULL) {
        az_opts_t first = *o; /* quick builds its variants as it goes */
        if (o->quick)
            first.search_disable = true;
        st = az_variants(&first, model, base, &p.vs, &p.nv);
        p.cap_v = p.nv;
    }
    if (st) {
        fprintf(stderr, "nereid-analyzer: %s: %s\n", model, st->msg);
        nr_status_free(st);
        free(base);
        return false;
    }
    p.n_saved = az_checkpoint_load(o, model, &p.saved);
    if (p.n_saved)
        fprintf(stderr, "nereid-analyzer: %s: resuming from %s/%s.ckpt (%zu runs measured)\n",
                model, o->checkpoint_dir, model, p.n_saved);
    if (o->quick)
        st = quick(&p);
    else
        brute(&p);
    if (st == NULL)
        st = refine(&p);
    if (st) {
        fprintf(stderr, "nereid-analyzer: %s: %s\n", model, st->msg);
        nr_status_free(st);
    }
    ssize_t best = az_best_run(o, p.runs, p.nr);
    char why[1024];
    az_explain(o, p.vs, p.runs, p.nr, best, why, sizeof(why));
    bool ok = st == NULL;
    bool *written = nr_calloc(p.nv ? p.nv : 1, sizeof(bool));
    for (size_t i = 0; i < p.nr && ok; i++) {
        size_t vi = p.runs[i].variant;
        if (p.runs[i].error || written[vi])
            continue;
        written[vi] = true;
        st = az_variant_write(o, model, &p.vs[vi], o->out_repo, p.vs[vi].name);
        if (st) {
            fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
            nr_status_free(st);
            ok = false;
        }
    }
    free(written);
    if (ok && best >= 0 &&
        (st = az_variant_write(o, model, &p.vs[p.runs[best].variant], o->out_repo, model))) {
        fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
        nr_status_free(st);
        ok = false;
    }
    if (ok && (st = az_write_csv(o, model, p.vs, p.runs, p.nr, model == o->models[0])) != NULL) {
        fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
        nr_status_free(st);
        ok = false;
    }
    char results[PATH_MAX + 64], report[PATH_MAX + 64] = "";
    if (ok && (st = az_results_save(o, model, p.vs, p.runs, p.nr, best, why, results,
                                    sizeof(results))) == NULL)
        st = write_report(o->export_path, results, report, sizeof(report));
    if (st) {
        fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
        nr_status_free(st);
        ok = false;
    }
    if (cands && ok)
        candidates(&p, cands);
    size_t points = 0;
    for (size_t i = 0; i < p.nr; i++)
        points += p.runs[i].n_pts;
    printf("%s: %zu runs (%zu measured now), %zu measurements in %.0f s\n", model, p.nr,
           p.measured, points, now_s() - p.started);
    printf("%s: best: %s\n", model, why);
    if (best >= 0)
        printf("%s: written as %s/%s/config.pbtxt\n", model, o->out_repo, model);
    if (best >= 0 && p.vs[p.runs[best].variant].tune == AZ_TUNE_PIN)
        printf("%s: its instance groups name host policies: serve it with %s\n", model,
               p.vs[p.runs[best].variant].pin_flags);
    if (*report)
        printf("%s: report: %s\n", model, report);
    fflush(stdout);
    for (size_t i = 0; i < p.nr; i++)
        az_run_free(&p.runs[i]);
    free(p.runs);
    az_saved_free(p.saved, p.n_saved);
    az_variants_free(p.vs, p.nv);
    free(base);
    return ok && best >= 0;
}

int main(int argc, char **argv)
{
    az_opts_t o;
    parse_args(argc, argv, &o);
    if (o.report) {
        int rc = run_report(&o);
        opts_free(&o);
        return rc;
    }
    struct stat sb;
    if (strcmp(o.launch_mode, "local") == 0 && (stat(o.repo, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        usage_error("--model-repository %s: not a directory", o.repo);
    nr_status_t *st = az_mkdirs(o.export_path);
    if (st == NULL)
        st = prepare_out_repo(&o);
    bool grpc = st == NULL && strcmp(o.protocol, "grpc") == 0;
    if (grpc)
        nr_grpc_lib_init();
    az_server_t s = {.conn.fd = -1};
    int rc = 0;
    if (st != NULL || (st = az_server_start(&s, &o)) != NULL) {
        fprintf(stderr, "nereid-analyzer: %s\n", st->msg);
        nr_status_free(st);
        rc = AZ_EXIT_ERROR;
    } else {
        az_cands_t *cands = o.together ? nr_calloc(o.n_models, sizeof(*cands)) : NULL;
        size_t together = 0; /* the models with candidates */
        for (size_t i = 0; i < o.n_models; i++) { /* a model that fails leaves the others */
            if (!profile_model(&o, &s, o.models[i], cands ? &cands[together] : NULL))
                rc = AZ_EXIT_ERROR;
            if (cands && cands[together].n > 0) {
                together++;
            } else if (cands) {
                free(cands[together].vs);
                cands[together].vs = NULL;
            }
        }
        if (cands && together < o.n_models)
            fprintf(stderr, "nereid-analyzer: together: not measured: %zu of the %zu models "
                    "have no variant that served\n", o.n_models - together, o.n_models);
        else if (cands && together > 1 && !az_profile_together(&o, &s, cands, together))
            rc = AZ_EXIT_ERROR;
        for (size_t i = 0; cands && i < o.n_models; i++)
            az_variants_free(cands[i].vs, cands[i].n);
        free(cands);
    }
    az_server_stop(&s);
    if (grpc)
        grpc_shutdown_blocking(); /* its threads joined before exit */
    opts_free(&o);
    return rc;
}
