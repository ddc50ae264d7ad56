/* registry.c - the static list of backends, like nginx's ngx_modules[], the backend
 * directory and the --backend-config settings. Immutable once the server starts; safe from
 * any thread. Names only: the core maps a platform (onnxruntime_onnx) to its backend name
 * before asking here. */
#include "backend.h"

#include "../common/alloc.h"
#include "../common/log.h"

#include <stddef.h>
#include <string.h>

extern const nr_backend_t nr_ort_backend;
extern const nr_backend_t nr_python_backend;

static const nr_backend_t *const backends[] = {
    &nr_ort_backend,
    &nr_python_backend,
};

const nr_backend_t *nr_backend_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
        if (backends[i]->abi_version == NR_BACKEND_ABI_VERSION && strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}

static const char *g_directory;

void nr_backend_set_directory(const char *dir) { g_directory = dir; }
const char *nr_backend_directory(void) { return g_directory; }

/* --backend-config settings, in the order given (the last of one key wins). */
typedef struct {
    char *backend; /* "" for a setting of every backend */
    char *key, *value;
} setting_t;

static setting_t *g_settings;
static size_t g_n_settings;

nr_status_t *nr_backend_config_add(const char *arg)
{
    const char *comma = strchr(arg, ','), *eq = strchr(arg, '=');
    if (eq == NULL || eq == arg || (comma != NULL && comma > eq) || comma == arg ||
        (comma != NULL && comma + 1 == eq))
        return nr_status_new(NR_INVALID_ARG, "--backend-config option format is '<backend "
                             "name>,<setting>=<value>'. Got %s", arg);
    const char *key = comma != NULL ? comma + 1 : arg;
    g_settings = nr_realloc(g_settings, (g_n_settings + 1) * sizeof(*g_settings));
    g_settings[g_n_settings++] = (setting_t){
        .backend = comma != NULL ? nr_strndup(arg, (size_t)(comma - arg)) : nr_strdup(""),
        .key = nr_strndup(key, (size_t)(eq - key)),
        .value = nr_strdup(eq + 1),
    };
    return NULL;
}

/* Keys every backend takes (Triton's core hands them to each). */
static const char *const global_keys[] = {"default-max-batch-size", NULL};

static bool listed(const char *const *keys, const char *key)
{
    for (size_t i = 0; keys != NULL && keys[i] != NULL; i++)
        if (!strcmp(keys[i], key))
            return true;
    return false;
}

void nr_backend_config_check(void)
{
    for (size_t i = 0; i < g_n_settings; i++) {
        const setting_t *t = &g_settings[i];
        if (t->backend[0] == '\0') {
            if (!listed(global_keys, t->key))
                NR_LOG_WARN("--backend-config=%s=%s has no effect: no backend has a setting "
                            "'%s'", t->key, t->value, t->key);
            continue;
        }
        const nr_backend_t *b = nr_backend_find(t->backend);
        if (b == NULL)
            NR_LOG_WARN("--backend-config=%s,%s=%s has no effect: nereid has no backend '%s' "
                        "(onnxruntime, python)", t->backend, t->key, t->value, t->backend);
        else if (!listed(b->config_keys, t->key) && !listed(global_keys, t->key))
            NR_LOG_WARN("--backend-config=%s,%s=%s has no effect: the %s backend has no "
                        "setting '%s'", t->backend, t->key, t->value, t->backend, t->key);
    }
}

const char *nr_backend_config(const char *backend, const char *key)
{
    const char *own = NULL, *global = NULL;
    for (size_t i = 0; i < g_n_settings; i++) {
        const setting_t *t = &g_settings[i];
        if (strcmp(t->key, key) != 0)
            continue;
        if (strcmp(t->backend, backend) == 0)
            own = t->value;
        else if (t->backend[0] == '\0')
            global = t->value;
    }
    return own != NULL ? own : global;
}
