/* analyzer_yaml.c - -f/--config-file: Model Analyzer's YAML config as command-line arguments
 * (analyzer.h).
 *
 * Model Analyzer's YAML keys are its flags in snake_case (`run_config_search_max_concurrency:
 * 16` is `--run-config-search-max-concurrency=16`); a few are YAML-only mappings, of which
 * nereid-analyzer takes `constraints` (perf_latency_p99 max, perf_throughput min, cpu_used_ram
 * max), `objectives` as a list or a weighted mapping, and `profile_models` as a list or a
 * mapping of names without per-model settings. The file becomes arguments placed before the
 * command line's, so a flag given on the command line wins, as in Model Analyzer. An unknown
 * key or a value of the wrong shape is an error naming file:line. Parsed with libyaml.
 */
#include "analyzer.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct {
    const char *path;
    yaml_document_t *doc;
    char **args;
    size_t n;
} yaml_ctx_t;

static nr_status_t *at(const yaml_ctx_t *c, const yaml_node_t *node, const char *fmt,
                       const char *arg)
{
    char msg[512];
    snprintf(msg, sizeof(msg), fmt, arg);
    return nr_status_new(NR_INVALID_ARG, "%s:%zu: %s", c->path,
                         (size_t)node->start_mark.line + 1, msg);
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool is_null(const yaml_node_t *n)
{
    const char *s = scalar(n);
    if (n && n->type == YAML_MAPPING_NODE)
        return n->data.mapping.pairs.start == n->data.mapping.pairs.top;
    return s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null"));
}

static void add(yaml_ctx_t *c, char *arg)
{
    c->args = nr_realloc(c->args, (c->n + 1) * sizeof(*c->args));
    c->args[c->n++] = arg;
}

static yaml_node_t *node_of(const yaml_ctx_t *c, int id)
{
    return yaml_document_get_node(c->doc, id);
}

/* A list (sequence of scalars, or a scalar) as "a,b,c" into b. */
static nr_status_t *put_list(yaml_ctx_t *c, const yaml_node_t *v, const char *key, nr_buf_t *b)
{
    if (scalar(v)) {
        nr_buf_puts(b, scalar(v));
        return NULL;
    }
    if (v->type != YAML_SEQUENCE_NODE)
        return at(c, v, "%s: expected a value or a list", key);
    for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top;
         i++) {
        const char *s = scalar(node_of(c, *i));
        if (s == NULL)
            return at(c, node_of(c, *i), "%s: expected a list of values", key);
        nr_buf_printf(b, "%s%s", i == v->data.sequence.items.start ? "" : ",", s);
    }
    return NULL;
}

/* profile_models: a mapping of model names without per-model settings. */
static nr_status_t *put_models(yaml_ctx_t *c, const yaml_node_t *v, nr_buf_t *b)
{
    if (v->type != YAML_MAPPING_NODE)
        return put_list(c, v, "profile_models", b);
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const char *name = scalar(node_of(c, p->key));
        if (name == NULL)
            return at(c, node_of(c, p->key), "%s: expected model names", "profile_models");
        if (!is_null(node_of(c, p->value)))
            return at(c, node_of(c, p->value), "profile_models: per-model settings (for '%s') "
                      "are not supported yet", name);
        nr_buf_printf(b, "%s%s", p == v->data.mapping.pairs.start ? "" : ",", name);
    }
    return NULL;
}

/* objectives: a list of names, or a mapping of names to weights. */
static nr_status_t *put_objectives(yaml_ctx_t *c, const yaml_node_t *v, nr_buf_t *b)
{
    if (v->type != YAML_MAPPING_NODE)
        return put_list(c, v, "objectives", b);
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const char *name = scalar(node_of(c, p->key)), *w = scalar(node_of(c, p->value));
        if (name == NULL || w == NULL)
            return at(c, node_of(c, p->key), "%s: expected objective: weight", "objectives");
        nr_buf_printf(b, "%s%s:%s", p == v->data.mapping.pairs.start ? "" : ",", name, w);
    }
    return NULL;
}

/* constraints: {perf_latency_p99: {max: ms}, perf_throughput: {min: n},
 * cpu_used_ram: {max: MB}} as --latency-budget, --min-throughput, --max-memory. */
static nr_status_t *put_constraints(yaml_ctx_t *c, const yaml_node_t *v)
{
    static const struct {
        const char *metric, *bound, *flag;
    } map[] = {{"perf_latency_p99", "max", "latency-budget"},
               {"perf_throughput", "min", "min-throughput"},
               {"cpu_used_ram", "max", "max-memory"}};
    if (v->type != YAML_MAPPING_NODE)
        return at(c, v, "%s: expected a mapping of metrics", "constraints");
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node_of(c, p->key), *bounds = node_of(c, p->value);
        const char *metric = scalar(k);
        size_t m = 0;
        while (m < sizeof(map) / sizeof(map[0]) && (!metric || strcmp(metric, map[m].metric)))
            m++;
        if (m == sizeof(map) / sizeof(map[0]))
            return at(c, k, "constraints: '%s' is not supported (perf_latency_p99, "
                      "perf_throughput, cpu_used_ram)", metric ? metric : "?");
        if (bounds->type != YAML_MAPPING_NODE)
            return at(c, bounds, "constraints: %s: expected {min: ...} or {max: ...}", metric);
        for (yaml_node_pair_t *q = bounds->data.mapping.pairs.start;
             q < bounds->data.mapping.pairs.top; q++) {
            const char *bound = scalar(node_of(c, q->key)), *val = scalar(node_of(c, q->value));
            if (bound == NULL || val == NULL || strcmp(bound, map[m].bound) != 0)
                return at(c, node_of(c, q->key), strcmp(map[m].bound, "max") == 0
                          ? "constraints: %s takes {max: ...}" : "constraints: %s takes {min: ...}",
                          metric);
            add(c, nr_asprintf("--%s=%s", map[m].flag, val));
        }
    }
    return NULL;
}

static const struct option *option_named(const struct option *opts, const char *name)
{
    for (; opts->name; opts++)
        if (strcmp(opts->name, name) == 0)
            return opts;
    return NULL;
}

static nr_status_t *convert(yaml_ctx_t *c, const yaml_node_t *root, const struct option *opts)
{
    if (root == NULL || is_null(root))
        return NULL; /* an empty file */
    if (root->type != YAML_MAPPING_NODE)
        return at(c, root, "%s", "expected a mapping of settings (Model Analyzer's YAML keys)");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = node_of(c, p->key), *v = node_of(c, p->value);
        const char *key = scalar(k);
        if (key == NULL)
            return at(c, k, "%s", "a key must be a plain name");
        if (strcmp(key, "constraints") == 0) {
            nr_status_t *st = put_constraints(c, v);
            if (st)
                return st;
            continue;
        }
        char flag[128];
        snprintf(flag, sizeof(flag), "%s", key);
        for (char *s = flag; *s; s++)
            *s = *s == '_' ? '-' : *s;
        const struct option *o = option_named(opts, flag);
        if (o == NULL || !strcmp(flag, "help") || !strcmp(flag, "config-file"))
            return at(c, k, "unknown key '%s' (docs/analyzer.md lists the keys nereid-analyzer "
                      "takes)", key);
        if (o->has_arg == no_argument) {
            const char *s = scalar(v);
            bool on = s && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "yes"));
            bool off = s && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "no"));
            if (!on && !off)
                return at(c, v, "%s: expected true or false", key);
            if (on)
                add(c, nr_asprintf("--%s", flag));
            continue;
        }
        nr_buf_t b;
        nr_buf_init(&b);
        nr_buf_printf(&b, "--%s=", flag);
        nr_status_t *st = NULL;
        if (strcmp(key, "profile_models") == 0)
            st = put_models(c, v, &b);
        else if (strcmp(key, "objectives") == 0)
            st = put_objectives(c, v, &b);
        else if (strcmp(key, "batch_sizes") == 0)
            st = put_list(c, v, key, &b);
        else if (scalar(v) != NULL)
            nr_buf_puts(&b, scalar(v));
        else
            st = at(c, v, "%s: expected a value", key);
        if (st) {
            nr_buf_free(&b);
            return st;
        }
        add(c, nr_buf_steal(&b, NULL));
    }
    return NULL;
}

nr_status_t *az_yaml_args(const char *path, const struct option *opts, char ***args, size_t *n)
{
    *args = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return nr_status_new(NR_INVALID_ARG, "cannot read the config file %s: %s", path,
                             strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    nr_status_t *st = NULL;
    if (!yaml_parser_load(&parser, &doc)) {
        st = nr_status_new(NR_INVALID_ARG, "%s:%zu: %s", path,
                           (size_t)parser.problem_mark.line + 1,
                           parser.problem ? parser.problem : "not YAML");
    } else {
        yaml_ctx_t c = {.path = path, .doc = &doc};
        st = convert(&c, yaml_document_get_root_node(&doc), opts);
        if (st) {
            for (size_t i = 0; i < c.n; i++)
                free(c.args[i]);
            free(c.args);
        } else {
            *args = c.args;
            *n = c.n;
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    fclose(f);
    return st;
}
