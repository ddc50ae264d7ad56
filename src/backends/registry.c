/* registry.c - the static list of backends, like nginx's ngx_modules[], and the backend
 * directory. Immutable once the server starts; safe from any thread. Names only: the core maps a platform (onnxruntime_onnx) to its
 * backend name before asking here. */
#include "backend.h"

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
