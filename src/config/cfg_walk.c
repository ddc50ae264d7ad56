/* cfg_walk.c - one walk over a config through the schema tables (cfg_fields.c), for the three
 * writers: Triton's JSON (config_json.c), the protobuf binary (config_pb.c) and the text
 * format (config_pbtxt.c). The walker decides what is written and in which order (presence:
 * absent messages and unselected oneof members never, default scalars and empty repeated
 * fields only for an emitter that asks; declaration or field-number order; aliases never);
 * each writer is an emitter (cfg_int.h) that only spells the events. Pure.
 */
#include "cfg_int.h"

static void walk_msg(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_field_t *as,
                     const nr__cfg_msg_t *m, const void *base);

/* One value of f at p: a message, walked, or a scalar. */
static void walk_value(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_field_t *f,
                       const void *p)
{
    if (f->type == NR__F_MSG)
        walk_msg(e, ctx, f, f->sub, p);
    else
        e->scalar(ctx, f, p);
}

/* One entry of map field f, a message {key, value} of type `entry`. */
static void walk_entry(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_field_t *f,
                       const nr__cfg_msg_t *entry, const void *en)
{
    const nr__cfg_field_t *kf = &entry->fields[0], *vf = &entry->fields[1];
    e->entry_begin(ctx, f, kf, NR__CAT(en, kf->off, char));
    walk_value(e, ctx, vf, NR__CAT(en, vf->off, char));
    e->entry_end(ctx, f);
}

static void walk_shapemap(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_field_t *f,
                          const void *base)
{
    size_t n = *NR__CAT(base, f->off_n, size_t);
    if (n == 0 && !e->all_fields)
        return;
    typedef char **strv_t;
    char *const *names = *NR__CAT(base, f->off, strv_t);
    const nr_cfg_dims_t *dims = *NR__CAT(base, f->off_aux, nr_cfg_dims_t *);
    e->field_begin(ctx, f, true, n);
    for (size_t i = 0; i < n; i++) {
        nr__cfg_shape_entry_t en = {names[i], dims[i]};
        walk_entry(e, ctx, f, &nr__cfg_shape_entry_msg, &en);
    }
    e->field_end(ctx, f, true, n);
}

static void walk_repeated(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_field_t *f,
                          const void *base)
{
    size_t n = *NR__CAT(base, f->off_n, size_t);
    const char *arr = f->rep == NR__R_FIX2 ? NR__CAT(base, f->off, char)
                                           : *NR__CAT(base, f->off, char *);
    if (f->rep == NR__R_FIX2 && n > 2)
        n = 2; /* the inline array holds two */
    if (n == 0 && !e->all_fields)
        return;
    size_t es = nr__cfg_elem_size(f);
    e->field_begin(ctx, f, true, n);
    for (size_t i = 0; i < n; i++) {
        if (f->flags & NR__FL_MAP)
            walk_entry(e, ctx, f, f->sub, arr + i * es);
        else
            walk_value(e, ctx, f, arr + i * es);
    }
    e->field_end(ctx, f, true, n);
}

static void walk_field(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_field_t *f,
                       const void *base)
{
    if (f->flags & NR__FL_ALIAS)
        return;
    if (f->type == NR__F_SHAPEMAP) {
        walk_shapemap(e, ctx, f, base);
        return;
    }
    if (f->rep != NR__R_ONE) {
        walk_repeated(e, ctx, f, base);
        return;
    }
    if (f->type == NR__F_MSG) {
        if (!nr__cfg_msg_present(f, base))
            return;
    } else if (f->oneof != NULL) { /* a selected member is written even when zero */
        if (*NR__CAT(base, f->off_oneof, int) != f->oneof_val)
            return;
    } else if (!e->all_fields && nr__cfg_scalar_is_default(f, base)) {
        return;
    }
    e->field_begin(ctx, f, false, 1);
    walk_value(e, ctx, f, NR__CAT(base, f->off, char));
    e->field_end(ctx, f, false, 1);
}

static void walk_msg(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_field_t *as,
                     const nr__cfg_msg_t *m, const void *base)
{
    e->msg_begin(ctx, as);
    if (e->by_number) {
        for (const nr__cfg_field_t *f = nr__cfg_next_field(m, 0); f != NULL;
             f = nr__cfg_next_field(m, f->num))
            walk_field(e, ctx, f, base);
    } else {
        for (size_t i = 0; i < m->n_fields; i++)
            walk_field(e, ctx, &m->fields[i], base);
    }
    e->msg_end(ctx, as);
}

void nr__cfg_walk(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_msg_t *m,
                  const void *base)
{
    walk_msg(e, ctx, NULL, m, base);
}
