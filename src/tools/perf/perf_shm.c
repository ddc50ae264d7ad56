/* perf_shm.c - --shared-memory system (perf.h), as perf_analyzer does it: every request's
 * input data written once into POSIX shared memory regions (/dev/shm/<input>_0_<request>, key
 * "/<input>_0_<request>", the whole batch), one region per output that every request names
 * for its results (its size per batch when the output's shape is fixed, else
 * --output-shared-memory-size per batch element), all registered with the server before the
 * load and unregistered after it. The requests then carry region names instead of tensors.
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

nr_status_t *perf_shm_create(perf_model_t *m, const char *name, const void *data, size_t size)
{
    char *key = nr_asprintf("/%s", name);
    /* a region a killed run left behind is taken over, as perf_analyzer does */
    int fd = shm_open(key, O_CREAT | O_RDWR, 0600);
    nr_status_t *st = NULL;
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        st = nr_status_new(NR_INTERNAL, "unable to create shared memory region '%s': %s", key,
                           strerror(errno));
    } else if (data && size) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            st = nr_status_new(NR_INTERNAL, "unable to map shared memory region '%s': %s", key,
                               strerror(errno));
        } else {
            memcpy(p, data, size);
            munmap(p, size);
        }
    }
    if (fd >= 0)
        close(fd);
    if (fd >= 0) { /* listed even when it failed, so that it is removed */
        m->regions = nr_realloc(m->regions, (m->n_regions + 1) * sizeof(*m->regions));
        m->regions[m->n_regions].name = nr_strdup(name);
        m->regions[m->n_regions++].bytes = size;
    }
    free(key);
    return st;
}

void perf_shm_free(perf_model_t *m)
{
    for (size_t i = 0; i < m->n_regions; i++) {
        char *key = nr_asprintf("/%s", m->regions[i].name);
        shm_unlink(key);
        free(key);
        free(m->regions[i].name);
    }
    free(m->regions);
    m->regions = NULL;
    m->n_regions = 0;
}

static nr_status_t *shm_call(perf_ctl_t *c, const char *name, size_t bytes)
{
    nr_status_t *st = c->grpc ? perf_grpc_shm(&c->g, name, bytes)
                              : perf_http_shm(&c->http, name, bytes);
    if (st == NULL)
        return NULL;
    nr_status_t *out = name ? nr_status_new(st->code, "failed to register shared memory region "
                                            "'%s': %s", name, st->msg)
                            : nr_status_new(st->code, "failed to unregister shared memory: %s",
                                            st->msg);
    nr_status_free(st);
    return out;
}

nr_status_t *perf_shm_register(perf_ctl_t *c, const perf_model_t *m)
{
    nr_status_t *st = shm_call(c, NULL, 0);
    for (size_t i = 0; st == NULL && i < m->n_regions; i++)
        st = shm_call(c, m->regions[i].name, m->regions[i].bytes);
    return st;
}

nr_status_t *perf_shm_unregister(perf_ctl_t *c)
{
    return shm_call(c, NULL, 0);
}
