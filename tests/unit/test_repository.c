/* test_repository.c - the model repository's life cycle (core/repository.c) against a test
 * backend, on real directories: a load publishes every version at once, an unchanged reload
 * keeps the serving versions, a changed one loads beside them and swaps, a version that fails
 * publishes nothing, a bad config is recorded with its file and line, an unload retires
 * every version and the reaper unloads each once its last reference goes, a version policy
 * retires what it drops. The e2e suite covers the same through the HTTP and gRPC APIs; here
 * each phase of load_model is seen from inside, with the backend's own counts.
 */
#include "../../src/common/alloc.h"
#include "../../src/core/repository.h"
#include "fs_util.h"
#include "nr_test.h"
#include "test_backend.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the backend: the gated test backend's instances, with counted loads ---- */

static _Atomic int n_loads, n_unloads;

/* Fails a version whose directory holds a file named FAIL (model_path is
 * <model dir>/<version>/<default_model_filename>). */
static nr_status_t *rt_load(const nr_model_config_t *cfg, const char *dir, const char *path,
                            void **state)
{
    char *fail = nr_strdup(path);
    char *slash = strrchr(fail, '/');
    if (slash != NULL)
        strcpy(slash, "/FAIL");
    bool failing = access(fail, F_OK) == 0;
    free(fail);
    if (failing)
        return nr_status_new(NR_INVALID_ARG, "test backend refuses %s", path);
    atomic_fetch_add(&n_loads, 1);
    *state = (void *)cfg;
    return NULL;
}

static void rt_unload(void *state)
{
    atomic_fetch_add(&n_unloads, 1);
}

static const nr_backend_t repo_backend = {"test", NR_BACKEND_ABI_VERSION, NULL, rt_load, tb_inst,
                                          tb_exec, tb_inst_destroy, rt_unload};

static const nr_backend_t *find_backend(const char *name)
{
    return strcmp(name, "test") == 0 ? &repo_backend : NULL;
}

/* ---- directories ---- */

#define CFG(extra)                                                                           \
    "name: \"m\"\nbackend: \"test\"\ndefault_model_filename: \"model.test\"\n"              \
    "max_batch_size: 0\ninput [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"     \
    "output [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"                       \
    "instance_group [ { count: 1 kind: KIND_CPU } ]\n" extra

/* A repository in a new temporary directory with model m, versions 1 and 2, every version
 * served; explicit model control (nothing loaded at start). */
typedef struct {
    char root[64];
    char *model_dir;
    nr_repo_t *repo;
} fixture_t;

static bool fixture_start(fixture_t *f)
{
    snprintf(f->root, sizeof(f->root), "/tmp/nereid-test-repo-XXXXXX");
    if (mkdtemp(f->root) == NULL)
        return false;
    f->model_dir = nr_asprintf("%s/m", f->root);
    put_file(f->root, "m/config.pbtxt", CFG("version_policy: { all { } }\n"));
    put_file(f->root, "m/1/model.test", "1");
    put_file(f->root, "m/2/model.test", "2");
    const char *paths[] = {f->root};
    nr_repo_options_t ro = {.paths = paths, .n_paths = 1, .autocomplete = true,
                            .cpu_count = 1, .mode = NR_CONTROL_EXPLICIT,
                            .find_backend = find_backend};
    nr_status_t *st = nr_repo_create(&ro, &f->repo);
    if (st != NULL) {
        fprintf(stderr, "nr_repo_create: %s\n", st->msg);
        nr_status_free(st);
        return false;
    }
    return true;
}

static void fixture_stop(fixture_t *f)
{
    if (f->repo != NULL)
        nr_repo_destroy(f->repo);
    remove_tree(f->root);
    free(f->model_dir);
}

/* The serving model of a version (-1: the highest), with a reference, or NULL. */
static nr_model_t *serving(fixture_t *f, int64_t version)
{
    nr_model_t *m = NULL;
    nr_status_t *st = nr_repo_get(f->repo, "m", 1, version, &m);
    nr_status_free(st);
    return st == NULL ? m : NULL;
}

/* "<version>:<STATE>[:<reason>] ..." of every record of `name`. */
static void add_record(const nr_repo_version_t *v, void *arg)
{
    static const char *const names[] = {"UNKNOWN", "READY", "UNAVAILABLE", "LOADING",
                                        "UNLOADING"};
    char *b = arg;
    size_t n = strlen(b);
    snprintf(b + n, 512 - n, "%s%" PRId64 ":%s%s%s", n ? " " : "", v->version, names[v->state],
             v->reason ? ":" : "", v->reason ? v->reason : "");
}

static const char *records(fixture_t *f, const char *name)
{
    static char b[512];
    b[0] = '\0';
    nr_repo_visit(f->repo, name, strlen(name), add_record, b);
    return b;
}

/* Waits (5 s at most) until the backend has unloaded `n` models in all. */
static bool unloads_reach(int n)
{
    for (int i = 0; i < 500 && atomic_load(&n_unloads) < n; i++)
        usleep(10000);
    return atomic_load(&n_unloads) >= n;
}

/* A new modification time for what was written last (stamps compare times). */
static void later(void)
{
    usleep(20000);
}

NR_TEST(a_load_publishes_every_version)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f));
    int loads = atomic_load(&n_loads);
    EXPECT_NULL(serving(&f, -1)); /* explicit mode: nothing loaded at start */
    EXPECT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    EXPECT_EQ_INT(atomic_load(&n_loads) - loads, 2);
    EXPECT_STREQ(records(&f, "m"), "1:READY 2:READY");
    nr_model_t *m = serving(&f, -1);
    ASSERT_NOT_NULL(m);
    EXPECT_EQ_INT(m->version, 2);
    EXPECT_EQ_INT(m->state, NR_MODEL_READY);
    nr_model_release(m);
    fixture_stop(&f);
}

NR_TEST(an_unchanged_reload_keeps_the_serving_versions)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f));
    ASSERT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    nr_model_t *before = serving(&f, 2);
    int loads = atomic_load(&n_loads);
    EXPECT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    EXPECT_EQ_INT(atomic_load(&n_loads), loads); /* nothing loaded again */
    nr_model_t *after = serving(&f, 2);
    EXPECT_TRUE(before != NULL && before == after);
    nr_model_release(before);
    nr_model_release(after);
    fixture_stop(&f);
}

NR_TEST(a_changed_config_loads_beside_and_swaps)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f));
    ASSERT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    nr_model_t *old = serving(&f, 2); /* a request in flight on the old version */
    ASSERT_NOT_NULL(old);
    int loads = atomic_load(&n_loads), unloads = atomic_load(&n_unloads);
    later();
    put_file(f.root, "m/config.pbtxt",
             CFG("version_policy: { all { } }\nparameters { key: \"k\" value: { string_value: "
                 "\"v\" } }\n"));
    EXPECT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    EXPECT_EQ_INT(atomic_load(&n_loads) - loads, 2); /* both versions: the config is theirs */
    nr_model_t *now = serving(&f, 2);
    ASSERT_NOT_NULL(now);
    EXPECT_TRUE(now != old);
    EXPECT_EQ_INT(now->cfg->n_parameters, 1);
    EXPECT_STREQ(records(&f, "m"), "1:READY 2:READY");
    /* the replaced versions are unloaded once their last reference goes, not before */
    usleep(50000);
    EXPECT_EQ_INT(atomic_load(&n_unloads) - unloads, 1); /* version 1 had no request */
    EXPECT_EQ_INT(old->state, NR_MODEL_READY);            /* still whole for its request */
    nr_model_release(old);
    EXPECT_TRUE(unloads_reach(unloads + 2));
    nr_model_release(now);
    fixture_stop(&f);
}

NR_TEST(a_failed_version_publishes_nothing)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f));
    ASSERT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    nr_model_t *old1 = serving(&f, 1), *old2 = serving(&f, 2);
    ASSERT_TRUE(old1 != NULL && old2 != NULL);
    int unloads = atomic_load(&n_unloads);
    later();
    put_file(f.root, "m/2/FAIL", "");
    put_file(f.root, "m/config.pbtxt",
             CFG("version_policy: { all { } }\nparameters { key: \"k\" value: { string_value: "
                 "\"v\" } }\n"));
    char *path = nr_asprintf("%s/m/2/model.test", f.root);
    char *want = nr_asprintf("load failed for model 'm': version 2 is at UNAVAILABLE state: "
                             "Invalid argument: test backend refuses %s;\n",
                             path);
    EXPECT_STATUS(nr_repo_load(f.repo, "m", 1, NULL), NR_INVALID_ARG, want);
    free(want);
    free(path);
    /* the serving versions serve on, unchanged; the new version 1 that did load is freed */
    nr_model_t *now1 = serving(&f, 1), *now2 = serving(&f, 2);
    EXPECT_TRUE(now1 == old1 && now2 == old2);
    EXPECT_EQ_INT(now2->cfg->n_parameters, 0);
    EXPECT_STREQ(records(&f, "m"), "1:READY 2:READY");
    EXPECT_EQ_INT(atomic_load(&n_unloads) - unloads, 1);
    nr_model_release(now1);
    nr_model_release(now2);
    nr_model_release(old1);
    nr_model_release(old2);
    fixture_stop(&f);
}

NR_TEST(a_bad_config_is_recorded_with_its_file_and_line)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f));
    put_file(f.root, "bad/config.pbtxt", "name: \"bad\"\nbackend: \"test\"\nmax_batch_size: x\n");
    put_file(f.root, "bad/1/model.test", "1");
    char *path = nr_asprintf("%s/bad/config.pbtxt", f.root);
    char *reason = nr_asprintf("Internal: failed to read text proto from %s: %s:3:17: "
                               "max_batch_size: expected an integer, got x",
                               path, path);
    char *want = nr_asprintf("failed to load 'bad', failed to poll from model repository: %s",
                             reason);
    EXPECT_STATUS(nr_repo_load(f.repo, "bad", 3, NULL), NR_INTERNAL, want);
    char *rec = nr_asprintf("-1:UNAVAILABLE:%s", reason); /* one record, no version */
    EXPECT_STREQ(records(&f, "bad"), rec);
    free(rec);
    free(want);
    free(reason);
    free(path);
    fixture_stop(&f);
}

NR_TEST(an_unload_retires_every_version)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f));
    ASSERT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    nr_model_t *held = serving(&f, 1);
    ASSERT_NOT_NULL(held);
    int unloads = atomic_load(&n_unloads);
    EXPECT_OK(nr_repo_unload(f.repo, "m", 1, false));
    EXPECT_NULL(serving(&f, -1)); /* no new request from now on */
    EXPECT_TRUE(unloads_reach(unloads + 1)); /* version 2: nothing held it */
    EXPECT_STREQ(records(&f, "m"), "1:UNLOADING 2:UNAVAILABLE:unloaded");
    nr_model_release(held);
    EXPECT_TRUE(unloads_reach(unloads + 2));
    for (int i = 0; i < 500 && strcmp(records(&f, "m"), "1:UNAVAILABLE:unloaded 2:UNAVAILABLE:"
                                                        "unloaded") != 0; i++)
        usleep(10000);
    EXPECT_STREQ(records(&f, "m"), "1:UNAVAILABLE:unloaded 2:UNAVAILABLE:unloaded");
    EXPECT_OK(nr_repo_unload(f.repo, "nobody", 6, false)); /* an unknown model is no error */
    fixture_stop(&f);
}

NR_TEST(a_version_policy_retires_what_it_drops)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f));
    ASSERT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    int unloads = atomic_load(&n_unloads);
    later();
    put_file(f.root, "m/config.pbtxt", CFG("version_policy: { latest { num_versions: 1 } }\n"));
    EXPECT_OK(nr_repo_load(f.repo, "m", 1, NULL));
    EXPECT_TRUE(unloads_reach(unloads + 2)); /* 1 dropped, 2 replaced (its config changed) */
    for (int i = 0; i < 500 && strcmp(records(&f, "m"), "1:UNAVAILABLE:unloaded 2:READY") != 0;
         i++)
        usleep(10000);
    EXPECT_STREQ(records(&f, "m"), "1:UNAVAILABLE:unloaded 2:READY");
    later();
    put_file(f.root, "m/config.pbtxt", CFG("version_policy: { specific { versions: [ 7 ] } }\n"));
    EXPECT_STATUS(nr_repo_load(f.repo, "m", 1, NULL), NR_INVALID_ARG,
                  "load failed for model 'm': at least one version must be available under the "
                  "version policy of model 'm'\n");
    EXPECT_STREQ(records(&f, "m"), "1:UNAVAILABLE:unloaded 2:READY"); /* version 2 serves on */
    fixture_stop(&f);
}

NR_TEST(files_sent_with_a_load_need_their_config)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f));
    nr_repo_file_t file = {"1/model.test", 12, "x", 1};
    nr_repo_load_params_t p = {.files = &file, .n_files = 1};
    EXPECT_STATUS(nr_repo_load(f.repo, "sent", 4, &p), NR_INVALID_ARG,
                  "failed to load 'sent', the model configuration must be given ('config' "
                  "parameter) with its files");
    const char *json = "{\"name\":\"sent\",\"backend\":\"test\","
                       "\"default_model_filename\":\"model.test\","
                       "\"input\":[{\"name\":\"IN\",\"data_type\":\"TYPE_INT32\",\"dims\":[1]}],"
                       "\"output\":[{\"name\":\"OUT\",\"data_type\":\"TYPE_INT32\",\"dims\":[1]}]}";
    p.config = json;
    p.config_len = strlen(json);
    EXPECT_OK(nr_repo_load(f.repo, "sent", 4, &p));
    EXPECT_STREQ(records(&f, "sent"), "1:READY");
    fixture_stop(&f);
}

NR_TEST_MAIN()
