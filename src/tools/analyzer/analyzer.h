/* analyzer.h - nereid-analyzer, Model Analyzer's counterpart (issue #21): what its files share.
 *
 *   analyzer_main.c     flags (Model Analyzer's names where they apply), the profile of each
 *                       model: variants, runs, the choice, the outputs; progress on stderr
 *   analyzer_server.c   the nereid it measures: started locally (or a remote one), model load
 *                       with a config override and unload through the repository API, the
 *                       server process's memory and CPU time from /proc
 *   analyzer_variant.c  the search space: variants of the model's config (max_batch_size,
 *                       dynamic batching, instance count) as config JSON, and each variant as a
 *                       loadable folder <model>_config_<n> with its config.pbtxt
 *   analyzer_run.c      one variant measured: a concurrency sweep with nereid-perf's engine
 *                       (perf_measure, in-process), Model Analyzer's early exit
 *   analyzer_result.c   constraints, objectives, the best variant and the sentence saying why;
 *                       the CSV files and the checkpoint a later run resumes from
 *   analyzer_multi.c    several models served together: combinations of each one's best
 *                       variants measured with all of them under load at once
 *
 * Data flows one way: options -> variants -> runs (measurements) -> choice -> outputs.
 */
#ifndef NR_ANALYZER_H
#define NR_ANALYZER_H

#include "../perf/perf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One setting tried on top of the best variant found (--run-config-search-refine):
 * OpenVINO as the CPU execution accelerator, a dynamic batcher's max queue delay of
 * AZ_QUEUE_DELAY_US, nereid's intra_op_worker_nice parameter at AZ_WORKER_NICE (sessions
 * over all cores, workers at low priority: lower latency at low load), a preferred batch size
 * of half max_batch_size with that queue delay (a batch leaves once half full, or when the
 * delay passes), or the instances pinned with host policies (az_pin_layout). */
typedef enum { AZ_TUNE_NONE, AZ_TUNE_OPENVINO, AZ_TUNE_QUEUE_DELAY, AZ_TUNE_WORKER_NICE,
               AZ_TUNE_PREFERRED, AZ_TUNE_PIN, AZ_TUNE_COUNT } az_tune_t;
#define AZ_QUEUE_DELAY_US 500
#define AZ_WORKER_NICE 19
#define AZ_STR_(x) #x
#define AZ_STR(x) AZ_STR_(x)

typedef struct {
    const char *repo, *out_repo, *export_path, *checkpoint_dir;
    const char *launch_mode; /* local | remote */
    const char *server_path; /* local: the nereid binary */
    const char *http_endpoint; /* remote: host:port */
    const char *protocol;    /* the measuring client: http | grpc */
    char **models;
    size_t n_models;
    char **file_args;        /* -f: the config file's settings as arguments */
    size_t n_file_args;
    char **argv;             /* -f: those, then the command line's */
    bool report;             /* the report subcommand */
    bool override_out;
    bool quick;              /* --run-config-search-mode quick */
    bool search_disable;     /* --run-config-search-disable: the default config only */
    bool together;           /* --run-config-profile-models-concurrently-enable */
    int num_configs;         /* --num-configs-per-model: candidates per model together */
    bool refine[AZ_TUNE_COUNT]; /* --run-config-search-refine: what is tried on the best */
    uint64_t min_conc, max_conc;
    int min_inst, max_inst, min_mbs, max_mbs;
    int batch;               /* -b: the client's batch size */
    double latency_budget_ms, min_throughput, max_memory_mb; /* 0: none */
    double w_throughput, w_latency, w_memory; /* --objectives weights */
    /* how each level is measured (perf_analyzer's flags) */
    uint64_t interval_ms;     /* 0: count windows */
    uint64_t request_count;
    int max_trials;
    double stability;
    bool verbose;
} az_opts_t;

/* ---- analyzer_server.c ---- */

typedef struct {
    pid_t pid;        /* local mode: the server process; 0 for a remote server */
    perf_conn_t conn; /* its HTTP endpoint, for the repository API */
    char url[96];     /* host:port of the measuring protocol */
    char http_url[96];
    char *log_path;   /* local mode: the server's log */
    unsigned loads;   /* models loaded since it started */
} az_server_t;

NR_MUST_CHECK nr_status_t *az_server_start(az_server_t *s, const az_opts_t *o);
void az_server_stop(az_server_t *s);
/* Local mode: whether the server process has ended, waiting up to wait_ms for it (reaped;
 * how in `how`). */
bool az_server_exited(az_server_t *s, unsigned wait_ms, char *how, size_t len);
/* Local mode: a new server (the old one stopped if it still runs), its log appended to the
 * same file. */
NR_MUST_CHECK nr_status_t *az_server_restart(az_server_t *s, const az_opts_t *o);
/* Local mode: each variant is measured on a server that has loaded nothing before it, as
 * Model Analyzer restarts its server for each: no earlier variant's threads, caches or
 * freed-but-kept memory skew its figures (a restart costs a fraction of a second). False when
 * no server could be started (said on stderr). */
bool az_server_fresh(az_server_t *s, const az_opts_t *o);
/* After a run of `what`: a server that ended during it (a variant that crashes it, the
 * kernel's OOM killer) fails that run alone (*error says so) and a new server takes over
 * (*down set when none could be started). True when it had ended. */
bool az_server_check(az_server_t *s, const az_opts_t *o, const char *what, char **error,
                     bool *down);
/* POST .../load, with {"parameters":{"config":<config_json>}} when config_json is given. */
NR_MUST_CHECK nr_status_t *az_server_load(az_server_t *s, const char *model,
                                          const char *config_json);
NR_MUST_CHECK nr_status_t *az_server_unload(az_server_t *s, const char *model);
/* GET .../config: the model's complete config as the server serves it (caller frees). */
NR_MUST_CHECK nr_status_t *az_server_config(az_server_t *s, const char *model, char **json);
/* The server process's resident memory in bytes now, and its peak since the last
 * az_server_reset_peak (0 when unknown: a remote server). */
uint64_t az_server_rss(const az_server_t *s);
uint64_t az_server_peak_rss(const az_server_t *s);
void az_server_reset_peak(const az_server_t *s);
/* The server process's CPU time (user + system) in ns; 0 when unknown. */
uint64_t az_server_cpu_ns(const az_server_t *s);

/* ---- analyzer_variant.c ---- */

typedef struct {
    char name[160];       /* <model>_config_default | <model>_config_<n> */
    bool is_default;
    int instances;        /* KIND_CPU instances; 0: the model's own groups (default) */
    int max_batch_size;   /* -1: the model's own (default) */
    bool dynamic_batching;
    az_tune_t tune;
    char pinned[256];     /* AZ_TUNE_PIN: its host policies' names, */
    char pin_flags[768];  /* and the server flags that define them */
    char *config_json;    /* the load override (name = the model's) */
} az_variant_t;

/* The model's own max_batch_size, and whether dynamic batching can be added (no sequence
 * batcher or ensemble scheduling in the config). */
NR_MUST_CHECK nr_status_t *az_base_info(const char *base_json, int *mbs, bool *can_dynamic);
/* The variants brute search measures, default first: every instance count in
 * [min_inst, max_inst] x every max_batch_size power of two in [min_mbs, max_mbs] with dynamic
 * batching (when the model batches; else instance counts alone). base_json: the server's
 * config of the model. */
NR_MUST_CHECK nr_status_t *az_variants(const az_opts_t *o, const char *model,
                                       const char *base_json, az_variant_t **out, size_t *n);
/* One variant with the given settings (quick search builds them one at a time). */
NR_MUST_CHECK nr_status_t *az_variant_make(const char *model, const char *base_json,
                                           int instances, int mbs, bool dynamic, size_t index,
                                           az_variant_t *v);
/* from's settings with one setting more; NR_NOT_FOUND when it does not apply (a queue delay
 * without the dynamic batcher). */
NR_MUST_CHECK nr_status_t *az_variant_tuned(const char *model, const char *base_json,
                                            const az_variant_t *from, az_tune_t tune,
                                            size_t index, az_variant_t *v);
void az_variants_free(az_variant_t *v, size_t n);
/* A copy of from (its own config_json). */
void az_variant_copy(az_variant_t *to, const az_variant_t *from);
/* Whether a and b are the same settings (the same config). */
bool az_variant_same(const az_variant_t *a, const az_variant_t *b);
/* A short description: "2 instances, max_batch_size 8, dynamic batching". */
void az_variant_describe(const az_variant_t *v, char *out, size_t len);
/* Writes <dir>/<dir_name>/ with config.pbtxt (its name set to dir_name) and the model's
 * version folders linked (or copied) from <repo>/<model>. */
NR_MUST_CHECK nr_status_t *az_variant_write(const az_opts_t *o, const char *model,
                                            const az_variant_t *v, const char *dir,
                                            const char *dir_name);

/* How n instances are pinned (AZ_TUNE_PIN): on a machine with several NUMA nodes, one host
 * policy per node (numa-node and its cores; the instances round robin over the nodes, at most
 * one node per instance); on one node, the cores this process may use split into min(n,
 * cores) contiguous sets, a policy each ("cpus0-3"). Fills out (count: the instances of its
 * group) and returns how many; 0 when pinning does not apply (fewer than two sets). */
typedef struct {
    char name[48];
    char cpus[256]; /* cpu-cores */
    int node;       /* numa-node; -1 on a single node */
    int count;
} az_policy_t;
#define AZ_MAX_POLICIES 64
size_t az_pin_layout(int instances, az_policy_t *out, size_t max);
/* Appends the --host-policy flags that define them ("--host-policy=cpus0-0,cpu-cores=0",
 * each malloc'd) to *argv, which grows with *argc; one already there is not added again. */
void az_pin_flags(const az_policy_t *p, size_t n, char ***argv, size_t *argc);

/* ---- analyzer_run.c ---- */

typedef struct {
    uint64_t concurrency;
    double throughput;                       /* infer/sec */
    double avg_ms, p50_ms, p90_ms, p95_ms, p99_ms;
    double queue_ms, input_ms, infer_ms, output_ms; /* server averages per request */
    double wait_ms;                          /* client response wait */
    double cpu_util;                         /* server CPU time / wall time: cores busy */
    double mem_mb;                           /* server RSS peak over the level, MB */
    bool stable;
} az_point_t;

typedef struct {
    size_t variant;        /* index into the model's variants */
    uint64_t min_conc, max_conc; /* the concurrency range swept */
    double load_mb;        /* the model's memory: RSS loaded - RSS unloaded, MB (-1: unknown) */
    double load_s;         /* how long the load took */
    az_point_t *pts;
    size_t n_pts;
    char *error;           /* the variant failed to load or to serve */
} az_run_t;

/* Loads v, sweeps it over concurrency min_conc, 2 x min_conc, ... up to max_conc, unloads
 * it. A failure is recorded in r->error. */
void az_run_variant(const az_opts_t *o, az_server_t *s, const char *model,
                    const az_variant_t *v, size_t index, uint64_t min_conc, uint64_t max_conc,
                    az_run_t *r);
/* Several models, each with its variant, loaded into the server together and swept over
 * concurrency together: at each level every model has that many requests in flight, all
 * measured over the same windows. runs[i] (its variant index kept) is model i's; load_mb is
 * what unloading all of them gave back, in each run; a failure is every run's error. */
void az_run_together(const az_opts_t *o, az_server_t *s, char *const *models,
                     const az_variant_t *const *vs, size_t n, uint64_t min_conc,
                     uint64_t max_conc, az_run_t *runs);
/* The highest throughput the run measured (0 without measurements). */
double az_run_peak(const az_run_t *r);
void az_run_free(az_run_t *r);

/* ---- analyzer_result.c ---- */

/* True when the measurement meets --latency-budget, --min-throughput and the memory limit. */
bool az_satisfies(const az_opts_t *o, const az_run_t *r, const az_point_t *p);
/* >0 when a is better than b under --objectives (weighted relative gains). */
double az_compare(const az_opts_t *o, const az_run_t *ra, const az_point_t *a,
                  const az_run_t *rb, const az_point_t *b);
/* A run's best measurement under the constraints (NULL: none satisfies them). */
const az_point_t *az_best_point(const az_opts_t *o, const az_run_t *r);
/* The best run (index into runs; -1 when none satisfies the constraints). */
ssize_t az_best_run(const az_opts_t *o, const az_run_t *runs, size_t n);
/* One sentence: why the best won, against the default. */
void az_explain(const az_opts_t *o, const az_variant_t *vs, const az_run_t *runs, size_t n,
                ssize_t best, char *out, size_t len);
/* results/metrics-model-inference.csv: Model Analyzer's columns, then nereid's. The first
 * model of a profile starts the file anew; the others append their rows. */
NR_MUST_CHECK nr_status_t *az_write_csv(const az_opts_t *o, const char *model,
                                        const az_variant_t *vs, const az_run_t *runs, size_t n,
                                        bool first);
/* The same rows into <export-path>/results/<file>, each row starting with prefix and the
 * header with head (the models-together file's columns before Model Analyzer's); the header
 * is written when first (the file started anew) or the file is new. */
NR_MUST_CHECK nr_status_t *az_write_csv_rows(const az_opts_t *o, const char *file,
                                             const char *head, const char *prefix,
                                             const char *model, const az_variant_t *vs,
                                             const az_run_t *runs, size_t n, bool first);
/* The checkpoint: every finished run of a model, to resume an interrupted profile. */
NR_MUST_CHECK nr_status_t *az_checkpoint_save(const az_opts_t *o, const char *model,
                                              const az_variant_t *vs, const az_run_t *runs,
                                              size_t n);
/* A run as the checkpoint or the results file holds it, with its variant. */
typedef struct {
    char *config;           /* the variant's config (JSON): how a checkpoint run is matched */
    char *name, *description; /* the variant's ("<model>_config_0", "2 instances, ...") */
    bool is_default;
    az_run_t run;           /* run.variant is not set */
} az_saved_run_t;
/* The runs the checkpoint holds; *out is malloc'd. An unreadable checkpoint is ignored, with
 * a line on stderr. */
size_t az_checkpoint_load(const az_opts_t *o, const char *model, az_saved_run_t **out);
void az_saved_free(az_saved_run_t *s, size_t n);

/* <export-path>/results/<model>.json: the checkpoint's runs, the best run and its best
 * concurrency, and the sentence; the report is made from it. Its path into path. */
NR_MUST_CHECK nr_status_t *az_results_save(const az_opts_t *o, const char *model,
                                           const az_variant_t *vs, const az_run_t *runs,
                                           size_t n, ssize_t best, const char *why, char *path,
                                           size_t path_len);
typedef struct {
    char *model, *why;
    az_saved_run_t *runs;
    size_t n;
    ssize_t best_run;          /* -1: nothing met the constraints */
    uint64_t best_concurrency;
} az_results_t;
NR_MUST_CHECK nr_status_t *az_results_load(const char *path, az_results_t *out);
void az_results_free(az_results_t *r);

/* mkdir -p */
NR_MUST_CHECK nr_status_t *az_mkdirs(const char *path);

/* ---- analyzer_multi.c ---- */

/* One model's candidates for serving with the others: its best variants measured alone, best
 * first (at most --num-configs-per-model), and its default config (added when it is not among
 * them). */
typedef struct {
    const char *model;
    az_variant_t *vs;
    size_t n;
} az_cands_t;

/* --run-config-profile-models-concurrently-enable: combinations of the models' candidates
 * measured with all of them loaded and under load at once, the best under the constraints
 * and objectives chosen (each model's candidate in it written as <model>/), the rows in
 * <export-path>/results/metrics-models-together.csv. False when nothing met the constraints
 * or the outputs could not be written. */
bool az_profile_together(const az_opts_t *o, az_server_t *s, const az_cands_t *c, size_t n);

/* The name of the models-together files: <checkpoint-directory>/models-together.ckpt,
 * <export-path>/results/models-together.json, .../metrics-models-together.csv and
 * reports/summaries/models-together/ (a model of that name cannot be profiled together). */
#define AZ_TOGETHER "models-together"
/* The combinations measured (combos[k]: combination k's run of each model, whose variant
 * indexes that model's candidates) as the checkpoint (results false) or the results file
 * with the best combination, its level and the sentence; the file's path into path. */
NR_MUST_CHECK nr_status_t *az_together_save(const az_opts_t *o, bool results,
                                            const az_cands_t *c, size_t n,
                                            az_run_t *const *combos, size_t n_combos,
                                            ssize_t best, uint64_t best_conc, const char *why,
                                            char *path, size_t path_len);
/* Either file read back: one az_results_t per model, run k of each being combination k (its
 * variant's config, name and description), best_run the best combination. *out is malloc'd
 * (even on an error: free each, then it). */
NR_MUST_CHECK nr_status_t *az_together_load(const char *path, az_results_t **out, size_t *n);
/* <export-path>/reports/summaries/models-together/result_summary.html from those results:
 * per model, its throughput against p99 in each combination; memory per combination; every
 * measurement. */
NR_MUST_CHECK nr_status_t *az_report_together(const char *export_path, az_results_t *per_model,
                                              size_t n, char *out, size_t out_len);

/* ---- analyzer_yaml.c ---- */

/* -f/--config-file: Model Analyzer's YAML keys as arguments ("--key=value") for getopt with
 * opts, to be placed before the command line's (*args and each of them malloc'd). */
struct option;
NR_MUST_CHECK nr_status_t *az_yaml_args(const char *path, const struct option *opts,
                                        char ***args, size_t *n);

/* ---- analyzer_report.c ---- */

/* <export-path>/reports/summaries/<model>/result_summary.html (Model Analyzer's path) from a
 * results file: one self-contained page (inline SVG, no script, no network) with throughput against p99 per variant, the Pareto front and
 * the recommendation, memory per variant, and every measurement. Its path into out. */
NR_MUST_CHECK nr_status_t *az_report_write(const char *export_path, const az_results_t *r,
                                           char *out, size_t out_len);

#endif
