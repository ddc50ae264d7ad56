/* obs.c - the ring of recent per-request observations (obs.h).
 *
 * Slot protocol (seq is the slot's sequence word; even = stable):
 *   writer: claim i = head++ ; CAS seq even -> odd (or drop when odd) ;
 *           release fence ; store the fields ; store seq = odd + 1 (release)
 *   reader: s1 = seq (acquire) ; odd or 0 -> skip ; load the fields ;
 *           acquire fence ; s2 = seq ; keep when s1 == s2
 * The fields are relaxed atomics: a reader racing a writer may load a mix of
 * old and new values, and the changed sequence word tells it to drop them.
 */
#include "obs.h"

#include "../common/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct {
    atomic_uint_fast64_t seq; /* 0 = never written; odd = being written */
    atomic_uint_fast64_t t_ns;
    atomic_uint_least32_t us[NR_OBS_N];
} slot_t;

struct nr_obs_s {
    atomic_uint_fast64_t head; /* observations claimed so far */
    size_t mask;               /* cap - 1 */
    slot_t *slots;
};

nr_obs_t *nr_obs_new(size_t cap)
{
    size_t c = 2;
    while (c < cap && c < ((size_t)1 << 30))
        c <<= 1;
    nr_obs_t *o = nr_calloc(1, sizeof(*o));
    o->mask = c - 1;
    o->slots = nr_calloc(c, sizeof(slot_t)); /* zeroed: every seq 0 */
    atomic_init(&o->head, 0);
    return o;
}

void nr_obs_free(nr_obs_t *o)
{
    if (o == NULL)
        return;
    free(o->slots);
    free(o);
}

size_t nr_obs_cap(const nr_obs_t *o)
{
    return o->mask + 1;
}

void nr_obs_record(nr_obs_t *o, uint64_t t_ns, const uint32_t us[NR_OBS_N])
{
    uint64_t i = atomic_fetch_add_explicit(&o->head, 1, memory_order_relaxed);
    slot_t *s = &o->slots[i & o->mask];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if ((seq & 1) ||
        !atomic_compare_exchange_strong_explicit(&s->seq, &seq, seq + 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return; /* another writer holds the slot: drop this observation */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->t_ns, t_ns, memory_order_relaxed);
    for (int k = 0; k < NR_OBS_N; k++)
        atomic_store_explicit(&s->us[k], us[k], memory_order_relaxed);
    atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

size_t nr_obs_collect(const nr_obs_t *o, uint64_t since_ns, uint32_t *const out[NR_OBS_N])
{
    size_t n = 0;
    for (size_t i = 0; i <= o->mask; i++) {
        slot_t *s = &o->slots[i];
        uint64_t s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (s1 == 0 || (s1 & 1))
            continue;
        uint64_t t = atomic_load_explicit(&s->t_ns, memory_order_relaxed);
        uint32_t v[NR_OBS_N];
        for (int k = 0; k < NR_OBS_N; k++)
            v[k] = atomic_load_explicit(&s->us[k], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) != s1 || t < since_ns)
            continue;
        for (int k = 0; k < NR_OBS_N; k++)
            out[k][n] = v[k];
        n++;
    }
    return n;
}
