/* analyzer_variant.c - the search space and the variants' folders (analyzer.h).
 *
 * A variant is the server's own config of the model (GET .../config: complete, defaults
 * filled) with three top-level members replaced, as Model Analyzer's automatic brute search
 * builds them: max_batch_size, dynamic_batching ({} added when the model batches) and
 * instance_group (one KIND_CPU group of n instances). Edits are made on the JSON document, so
 * that every other member reaches the server and the written config.pbtxt unchanged; the
 * pbtxt comes from nereid's config parser and writer, which also checks the result. The
 * refinement's settings amend the best variant (az_variant_tuned); pinning lays the
 * instances out over the machine's NUMA nodes or cores (az_pin_layout).
 */
#include "analyzer.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"
#include "../../common/json.h"
#include "../../config/model_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool key_is(const nr_jv_member_t *m, const char *k)
{
    return m->key_len == strlen(k) && memcmp(m->key, k, m->key_len) == 0;
}

/* obj (an object, or NULL for an empty one) with member key set to the JSON text val. */
static void put_object_with(nr_buf_t *b, const nr_jv_t *obj, const char *key, const char *val)
{
    nr_buf_putc(b, '{');
    bool first = true;
    for (size_t i = 0; obj && obj->type == NR_JV_OBJECT && i < obj->n; i++) {
        const nr_jv_member_t *m = &obj->u.members[i];
        if (key_is(m, key))
            continue;
        if (!first)
            nr_buf_putc(b, ',');
        first = false;
        nr_buf_json_str(b, m->key, m->key_len);
        nr_buf_putc(b, ':');
        nr_json_write(b, &m->val);
    }
    nr_buf_printf(b, "%s", first ? "" : ",");
    nr_buf_json_str(b, key, strlen(key));
    nr_buf_printf(b, ":%s}", val);
}

/* base with name, max_batch_size (mbs >= 0), dynamic_batching and instance_group (instances
 * > 0: one KIND_CPU group; or groups, its JSON text) replaced, and the member the tuning
 * touches (optimization, parameters) amended. */
static nr_status_t *edit(const char *base_json, const char *name, int instances, int mbs,
                         bool dynamic, az_tune_t tune, const char *groups, char **out)
{
    nr_json_doc_t *doc;
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse(base_json, strlen(base_json), &doc, &root);
    if (st)
        return nr_status_prefix(st, "the server's config: ");
    if (root->type != NR_JV_OBJECT) {
        nr_json_free(doc);
        return nr_status_new(NR_INVALID_ARG, "the server's config is not a JSON object");
    }
    const char *tuned = tune == AZ_TUNE_OPENVINO ? "optimization"
                        : tune == AZ_TUNE_WORKER_NICE ? "parameters" : NULL;
    nr_buf_t b;
    nr_buf_init(&b);
    nr_buf_putc(&b, '{');
    bool first = true;
    for (size_t i = 0; i < root->n; i++) {
        const nr_jv_member_t *m = &root->u.members[i];
        if ((name && key_is(m, "name")) || (mbs >= 0 && key_is(m, "max_batch_size")) ||
            (dynamic && key_is(m, "dynamic_batching")) ||
            ((instances > 0 || groups) && key_is(m, "instance_group")) ||
            (tuned && key_is(m, tuned)))
            continue;
        if (!first)
            nr_buf_putc(&b, ',');
        first = false;
        nr_buf_json_str(&b, m->key, m->key_len);
        nr_buf_putc(&b, ':');
        nr_json_write(&b, &m->val);
    }
    const char *sep = first ? "" : ",";
    if (name) {
        nr_buf_printf(&b, "%s\"name\":", sep);
        nr_buf_json_str(&b, name, strlen(name));
        sep = ",";
    }
    if (mbs >= 0) {
        nr_buf_printf(&b, "%s\"max_batch_size\":%d", sep, mbs);
        sep = ",";
    }
    if (dynamic) {
        if (tune == AZ_TUNE_QUEUE_DELAY)
            nr_buf_printf(&b, "%s\"dynamic_batching\":{\"max_queue_delay_microseconds\":%d}",
                          sep, AZ_QUEUE_DELAY_US);
        else if (tune == AZ_TUNE_PREFERRED)
            nr_buf_printf(&b, "%s\"dynamic_batching\":{\"preferred_batch_size\":[%d],"
                          "\"max_queue_delay_microseconds\":%d}", sep, mbs / 2,
                          AZ_QUEUE_DELAY_US);
        else
            nr_buf_printf(&b, "%s\"dynamic_batching\":{}", sep);
        sep = ",";
    }
    if (groups) {
        nr_buf_printf(&b, "%s\"instance_group\":%s", sep, groups);
        sep = ",";
    } else if (instances > 0) {
        nr_buf_printf(&b, "%s\"instance_group\":[{\"count\":%d,\"kind\":\"KIND_CPU\"}]", sep,
                      instances);
        sep = ",";
    }
    if (tuned) {
        nr_buf_printf(&b, "%s\"%s\":", sep, tuned);
        if (tune == AZ_TUNE_OPENVINO)
            put_object_with(&b, nr_jv_get(root, tuned), "execution_accelerators",
                            "{\"cpu_execution_accelerator\":[{\"name\":\"openvino\"}]}");
        else
            put_object_with(&b, nr_jv_get(root, tuned), "intra_op_worker_nice",
                            "{\"string_value\":\"" AZ_STR(AZ_WORKER_NICE) "\"}");
    }
    nr_buf_putc(&b, '}');
    nr_json_free(doc);
    *out = nr_buf_steal(&b, NULL);
    return NULL;
}

nr_status_t *az_base_info(const char *base_json, int *mbs, bool *can_dynamic)
{
    nr_model_config_t *cfg;
    nr_status_t *st = nr_cfg_parse_json(base_json, strlen(base_json), &cfg);
    if (st)
        return nr_status_prefix(st, "the server's config: ");
    *mbs = cfg->max_batch_size;
    *can_dynamic = cfg->scheduling_choice == NR_SCHED_DEFAULT ||
                   cfg->scheduling_choice == NR_SCHED_DYNAMIC;
    nr_cfg_free(cfg);
    return NULL;
}

nr_status_t *az_variant_make(const char *model, const char *base_json, int instances, int mbs,
                             bool dynamic, size_t index, az_variant_t *v)
{
    memset(v, 0, sizeof(*v));
    snprintf(v->name, sizeof(v->name), "%s_config_%zu", model, index);
    v->instances = instances;
    v->max_batch_size = mbs;
    v->dynamic_batching = dynamic;
    return edit(base_json, NULL, instances, mbs, dynamic, AZ_TUNE_NONE, NULL, &v->config_json);
}

/* The instances of a config whose groups are all on the CPU and pinned to no policy; 0
 * otherwise. */
static int base_instances(const char *base_json)
{
    nr_model_config_t *cfg;
    nr_status_t *st = nr_cfg_parse_json(base_json, strlen(base_json), &cfg);
    if (st) {
        nr_status_free(st);
        return 0;
    }
    int n = 0;
    for (size_t i = 0; i < cfg->n_instance_group; i++) {
        const nr_cfg_instance_group_t *g = &cfg->instance_group[i];
        if (g->kind != NR_KIND_CPU || (g->host_policy && g->host_policy[0]) || g->passive) {
            n = 0;
            break;
        }
        n += g->count > 0 ? g->count : 1;
    }
    nr_cfg_free(cfg);
    return n;
}

nr_status_t *az_variant_tuned(const char *model, const char *base_json,
                              const az_variant_t *from, az_tune_t tune, size_t index,
                              az_variant_t *v)
{
    memset(v, 0, sizeof(*v));
    if (tune == AZ_TUNE_QUEUE_DELAY && !from->dynamic_batching)
        return nr_status_new(NR_NOT_FOUND, "no dynamic batcher to delay");
    if (tune == AZ_TUNE_PREFERRED && (!from->dynamic_batching || from->max_batch_size < 4))
        return nr_status_new(NR_NOT_FOUND, "no batch of 4 or more to send half of");
    char *groups = NULL;
    if (tune == AZ_TUNE_PIN) {
        int n = from->instances > 0 ? from->instances : base_instances(base_json);
        az_policy_t pol[AZ_MAX_POLICIES];
        size_t np = n > 0 ? az_pin_layout(n, pol, AZ_MAX_POLICIES) : 0;
        if (np == 0)
            return nr_status_new(NR_NOT_FOUND, "nothing to pin");
        nr_buf_t g;
        nr_buf_init(&g);
        nr_buf_putc(&g, '[');
        for (size_t i = 0; i < np; i++) {
            nr_buf_printf(&g, "%s{\"count\":%d,\"kind\":\"KIND_CPU\",\"host_policy\":", i ? ","
                          : "", pol[i].count);
            nr_buf_json_str(&g, pol[i].name, strlen(pol[i].name));
            nr_buf_putc(&g, '}');
        }
        nr_buf_putc(&g, ']');
        groups = nr_buf_steal(&g, NULL);
        char **flags = NULL;
        size_t nf = 0;
        az_pin_flags(pol, np, &flags, &nf);
        for (size_t i = 0; i < np; i++) {
            size_t k = strlen(v->pinned);
            snprintf(v->pinned + k, sizeof(v->pinned) - k, "%s%s", i ? ", " : "", pol[i].name);
        }
        for (size_t f = 0; f < nf; f++) {
            size_t k = strlen(v->pin_flags);
            snprintf(v->pin_flags + k, sizeof(v->pin_flags) - k, "%s%s", f ? " " : "",
                     flags[f]);
            free(flags[f]);
        }
        free(flags);
    }
    snprintf(v->name, sizeof(v->name), "%s_config_%zu", model, index);
    v->instances = from->instances;
    v->max_batch_size = from->max_batch_size;
    v->dynamic_batching = from->dynamic_batching;
    v->tune = tune;
    /* the default's own config is the base: only the tuning changes it */
    nr_status_t *st = edit(base_json, NULL, v->instances, v->max_batch_size,
                           v->dynamic_batching, tune, groups, &v->config_json);
    free(groups);
    return st;
}

/* ---- pinning ---- */

/* A cpulist ("0-3,8,10-11") into cpus; how many. */
static size_t parse_cpulist(const char *s, int *cpus, size_t max)
{
    size_t n = 0;
    while (*s && n < max) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s)
            break;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi && n < max; c++)
            cpus[n++] = (int)c;
        s = *end == ',' ? end + 1 : end;
        if (*end != ',')
            break;
    }
    return n;
}

/* The list in a sysfs file ("0-3,8"); how many (0 when it cannot be read). */
static size_t read_list(const char *path, int *out, size_t max)
{
    char list[4096];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fgets(list, sizeof(list), f) ? parse_cpulist(list, out, max) : 0;
    fclose(f);
    return n;
}

/* cpus[0..n) as cpu-cores ("0-3" when consecutive, else "0,2,5") */
static void cpus_text(const int *cpus, size_t n, char *out, size_t len)
{
    bool consecutive = true;
    for (size_t i = 1; i < n; i++)
        consecutive &= cpus[i] == cpus[i - 1] + 1;
    if (consecutive) {
        snprintf(out, len, "%d-%d", cpus[0], cpus[n - 1]);
        return;
    }
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%s%d", i ? "," : "", cpus[i]);
}

size_t az_pin_layout(int instances, az_policy_t *out, size_t max)
{
    int cpus[1024], nodes[256];
    size_t np = 0, n_nodes = read_list("/sys/devices/system/node/online", nodes, 256);
    for (size_t k = 0; k < n_nodes && np < max; k++) { /* the nodes with cores */
        int node = nodes[k];
        char path[96];
        snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
        size_t n = read_list(path, cpus, 1024);
        if (n == 0)
            continue;
        az_policy_t *p = &out[np++];
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "node%d", node);
        cpus_text(cpus, n, p->cpus, sizeof(p->cpus));
        p->node = node;
    }
    if (np > 1) { /* several nodes: the instances round robin over them */
        if ((size_t)instances < np)
            np = (size_t)instances;
        for (int i = 0; i < instances; i++)
            out[(size_t)i % np].count++;
        return np;
    }
    cpu_set_t set; /* one node: the cores this process may use, in min(n, cores) sets */
    size_t n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < 1024; c++)
            if (CPU_ISSET(c, &set))
                cpus[n++] = c;
    size_t sets = (size_t)instances < n ? (size_t)instances : n;
    if (sets > max)
        sets = max;
    if (sets < 2)
        return 0;
    for (size_t i = 0; i < sets; i++) {
        size_t lo = n * i / sets, hi = n * (i + 1) / sets; /* [lo, hi) */
        az_policy_t *p = &out[i];
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "cpus%d-%d", cpus[lo], cpus[hi - 1]);
        cpus_text(cpus + lo, hi - lo, p->cpus, sizeof(p->cpus));
        p->node = -1;
    }
    for (int i = 0; i < instances; i++)
        out[(size_t)i % sets].count++;
    return sets;
}

void az_pin_flags(const az_policy_t *p, size_t n, char ***argv, size_t *argc)
{
    for (size_t i = 0; i < n; i++) {
        char *flags[2] = {nr_asprintf("--host-policy=%s,cpu-cores=%s", p[i].name, p[i].cpus),
                          p[i].node >= 0 ? nr_asprintf("--host-policy=%s,numa-node=%d",
                                                       p[i].name, p[i].node) : NULL};
        for (int k = 0; k < 2 && flags[k]; k++) {
            bool have = false;
            for (size_t j = 0; j < *argc && !have; j++)
                have = strcmp((*argv)[j], flags[k]) == 0;
            if (have) {
                free(flags[k]);
                continue;
            }
            *argv = nr_realloc(*argv, (*argc + 1) * sizeof(**argv));
            (*argv)[(*argc)++] = flags[k];
        }
    }
}

nr_status_t *az_variants(const az_opts_t *o, const char *model, const char *base_json,
                         az_variant_t **out, size_t *n)
{
    int base_mbs = 0;
    bool can_dynamic = false;
    nr_status_t *st = az_base_info(base_json, &base_mbs, &can_dynamic);
    if (st)
        return st;
    size_t cap = 1, count = 0;
    for (int i = o->min_inst; i <= o->max_inst; i++)
        for (int b = o->min_mbs; b <= o->max_mbs; b *= 2)
            cap++;
    cap += (size_t)(o->max_inst - o->min_inst + 1);
    az_variant_t *vs = nr_calloc(cap, sizeof(*vs));
    az_variant_t *d = &vs[count++];
    snprintf(d->name, sizeof(d->name), "%s_config_default", model);
    d->is_default = true;
    d->max_batch_size = -1;
    d->config_json = nr_strdup(base_json);
    for (int i = o->min_inst; !o->search_disable && i <= o->max_inst && st == NULL; i++) {
        if (base_mbs == 0 || !can_dynamic) { /* no batching: instance counts alone */
            st = az_variant_make(model, base_json, i, base_mbs == 0 ? -1 : base_mbs, false,
                                 count - 1, &vs[count]);
            count++;
            continue;
        }
        for (int b = o->min_mbs; b <= o->max_mbs && st == NULL; b *= 2) {
            st = az_variant_make(model, base_json, i, b, true, count - 1, &vs[count]);
            count++;
        }
    }
    if (st) {
        az_variants_free(vs, count);
        return st;
    }
    *out = vs;
    *n = count;
    return NULL;
}

void az_variants_free(az_variant_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].config_json);
    free(v);
}

void az_variant_copy(az_variant_t *to, const az_variant_t *from)
{
    *to = *from;
    to->config_json = nr_strdup(from->config_json);
}

bool az_variant_same(const az_variant_t *a, const az_variant_t *b)
{
    return a->is_default == b->is_default && strcmp(a->config_json, b->config_json) == 0;
}

void az_variant_describe(const az_variant_t *v, char *out, size_t len)
{
    int k;
    if (v->is_default || v->instances == 0) { /* the default, or the default tuned */
        k = snprintf(out, len, "the model's own config");
    } else {
        k = snprintf(out, len, "%d instance%s", v->instances, v->instances == 1 ? "" : "s");
        if (v->max_batch_size > 0 && k >= 0 && (size_t)k < len)
            k += snprintf(out + k, len - (size_t)k, ", max_batch_size %d", v->max_batch_size);
        if (v->dynamic_batching && k >= 0 && (size_t)k < len)
            k += snprintf(out + k, len - (size_t)k, ", dynamic batching");
    }
    const char *tuned =
        v->tune == AZ_TUNE_OPENVINO ? ", OpenVINO"
        : v->tune == AZ_TUNE_QUEUE_DELAY ? ", max queue delay " AZ_STR(AZ_QUEUE_DELAY_US) " us"
        : v->tune == AZ_TUNE_WORKER_NICE ? ", intra_op_worker_nice " AZ_STR(AZ_WORKER_NICE)
        : v->tune == AZ_TUNE_PREFERRED ? ", preferred batch size half of max_batch_size, max "
                                         "queue delay " AZ_STR(AZ_QUEUE_DELAY_US) " us"
        : v->tune == AZ_TUNE_PIN ? ", pinned to host policies " : "";
    if (k >= 0 && (size_t)k < len)
        k += snprintf(out + k, len - (size_t)k, "%s", tuned);
    if (v->tune == AZ_TUNE_PIN && k >= 0 && (size_t)k < len)
        snprintf(out + k, len - (size_t)k, "%s", v->pinned);
}

/* ---- the folders ---- */

static nr_status_t *copy_file(const char *from, const char *to)
{
    if (link(from, to) == 0)
        return NULL;
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return nr_status_new(NR_INVALID_ARG, "cannot read %s: %s", from, strerror(errno));
    int outfd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (outfd < 0) {
        close(in);
        return nr_status_new(NR_INVALID_ARG, "cannot write %s: %s", to, strerror(errno));
    }
    char buf[1 << 16];
    ssize_t n;
    nr_status_t *st = NULL;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(outfd, buf, (size_t)n) != n) {
            st = nr_status_new(NR_INVALID_ARG, "cannot write %s: %s", to, strerror(errno));
            break;
        }
    if (n < 0 && st == NULL)
        st = nr_status_new(NR_INVALID_ARG, "cannot read %s: %s", from, strerror(errno));
    close(in);
    if (close(outfd) != 0 && st == NULL)
        st = nr_status_new(NR_INVALID_ARG, "cannot write %s: %s", to, strerror(errno));
    return st;
}

/* Everything in from/ except its config.pbtxt and configs/, into to/ (which exists). */
static nr_status_t *copy_tree(const char *from, const char *to, bool top)
{
    DIR *d = opendir(from);
    if (d == NULL)
        return nr_status_new(NR_INVALID_ARG, "cannot read %s: %s", from, strerror(errno));
    nr_status_t *st = NULL;
    struct dirent *e;
    while (st == NULL && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            (top && (!strcmp(e->d_name, "config.pbtxt") || !strcmp(e->d_name, "configs"))))
            continue;
        char src[PATH_MAX], dst[PATH_MAX];
        snprintf(src, sizeof(src), "%s/%s", from, e->d_name);
        snprintf(dst, sizeof(dst), "%s/%s", to, e->d_name);
        struct stat sb;
        if (stat(src, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode)) {
            if (mkdir(dst, 0755) != 0 && errno != EEXIST)
                st = nr_status_new(NR_INVALID_ARG, "cannot create %s: %s", dst, strerror(errno));
            else
                st = copy_tree(src, dst, false);
        } else if (S_ISREG(sb.st_mode)) {
            unlink(dst);
            st = copy_file(src, dst);
        }
    }
    closedir(d);
    return st;
}

nr_status_t *az_variant_write(const az_opts_t *o, const char *model, const az_variant_t *v,
                              const char *dir, const char *dir_name)
{
    char *json;
    nr_status_t *st = edit(v->config_json, dir_name, 0, -1, false, AZ_TUNE_NONE, NULL, &json);
    if (st)
        return st;
    nr_model_config_t *cfg;
    st = nr_cfg_parse_json(json, strlen(json), &cfg);
    free(json);
    if (st)
        return nr_status_prefix(st, "variant %s: ", v->name);
    size_t len;
    char *text = nr_cfg_to_pbtxt(cfg, &len);
    nr_cfg_free(cfg);
    char path[PATH_MAX], src[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, dir_name);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        st = nr_status_new(NR_INVALID_ARG, "cannot create %s: %s", path, strerror(errno));
    snprintf(src, sizeof(src), "%s/%s", o->repo, model);
    if (st == NULL)
        st = copy_tree(src, path, true);
    if (st == NULL) {
        snprintf(path, sizeof(path), "%s/%s/config.pbtxt", dir, dir_name);
        FILE *f = fopen(path, "w");
        bool ok = f != NULL && fwrite(text, 1, len, f) == len;
        if (f != NULL && fclose(f) != 0)
            ok = false;
        if (!ok)
            st = nr_status_new(NR_INVALID_ARG, "cannot write %s: %s", path, strerror(errno));
    }
    free(text);
    return st;
}
