/* config_pb.c - nr_model_config_t -> inference.ModelConfig in protobuf binary.
 *
 * The gRPC ModelConfig RPC answers ModelConfigResponse{ModelConfig config = 1}.
 * This is cfg_walk.c's protobuf emitter: the walker goes through the schema
 * tables of cfg_fields.c, the ones config_json.c prints JSON from, and this
 * writes the proto3 wire format the way protobuf's C++ serializer does:
 *   - fields in field-number order (oneof members too), whatever the order of
 *     the table;
 *   - singular scalars at their zero value are left out; a selected oneof
 *     member is written even when zero (oneof members have presence);
 *   - a sub-message is written when present (has-flag / oneof selector, the
 *     test config_json.c uses), an empty one as tag + length 0;
 *   - repeated numeric fields packed, repeated strings and messages one
 *     record each;
 *   - a map entry is a message {key = 1, value = 2} with both always written;
 *     entries keep the config's order;
 *   - int32/int64/enum are plain varints (negatives take 10 bytes), float is
 *     fixed32, double fixed64.
 * Lengths are not computed ahead: a length-delimited record reserves the
 * longest varint, and the body is moved down once its size is known.
 * Pure; the tables are immutable, so any thread may call it.
 */
#include "model_config.h"

#include "../common/buf.h"
#include "../common/varint.h"
#include "cfg_int.h"

#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static void put_varint(nr_buf_t *b, uint64_t v)
{
    uint8_t tmp[NR_VARINT_MAX];
    nr_buf_append(b, tmp, nr_varint_put(tmp, v));
}

static void put_tag(nr_buf_t *b, uint32_t num, int wire_type)
{
    put_varint(b, ((uint64_t)num << 3) | (uint64_t)wire_type);
}

static void put_le(nr_buf_t *b, uint64_t v, size_t n)
{
    uint8_t tmp[8];
    for (size_t i = 0; i < n; i++)
        tmp[i] = (uint8_t)(v >> (8 * i));
    nr_buf_append(b, tmp, n);
}

/* Opens a length-delimited record: reserves room for its length and returns
 * where the body starts. len_close writes the length and moves the body. */
static size_t len_open(nr_buf_t *b, uint32_t num)
{
    static const uint8_t room[NR_VARINT_MAX];
    put_tag(b, num, WT_LEN);
    nr_buf_append(b, room, sizeof(room));
    return b->len;
}

static void len_close(nr_buf_t *b, size_t body)
{
    uint8_t tmp[NR_VARINT_MAX];
    size_t size = b->len - body;
    size_t n = nr_varint_put(tmp, size);
    char *at = b->data + body - NR_VARINT_MAX;
    memmove(at + n, b->data + body, size);
    memcpy(at, tmp, n);
    b->len -= NR_VARINT_MAX - n;
    b->data[b->len] = '\0'; /* nr_buf_t keeps its bytes NUL-terminated */
}

static void put_bytes(nr_buf_t *b, uint32_t num, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put_tag(b, num, WT_LEN);
    put_varint(b, n);
    nr_buf_append(b, s ? s : "", n);
}

static int wire_type(const nr__cfg_field_t *f)
{
    switch (f->type) {
    case NR__F_FLOAT: return WT_I32;
    case NR__F_DOUBLE: return WT_I64;
    case NR__F_STRING:
    case NR__F_MSG:
    case NR__F_SHAPEMAP: return WT_LEN;
    default: return WT_VARINT;
    }
}

/* The bytes of one numeric value at p, without a tag. */
static void put_number(nr_buf_t *b, const nr__cfg_field_t *f, const void *p)
{
    switch (f->type) {
    case NR__F_BOOL: put_varint(b, *(const bool *)p ? 1 : 0); break;
    case NR__F_INT32:
    case NR__F_ENUM: /* sign-extended: a negative value is a 10-byte varint */
        put_varint(b, (uint64_t)(int64_t)*(const int32_t *)p);
        break;
    case NR__F_UINT32: put_varint(b, *(const uint32_t *)p); break;
    case NR__F_INT64: put_varint(b, (uint64_t)*(const int64_t *)p); break;
    case NR__F_UINT64: put_varint(b, *(const uint64_t *)p); break;
    case NR__F_FLOAT: {
        uint32_t bits;
        memcpy(&bits, p, sizeof(bits));
        put_le(b, bits, 4);
        break;
    }
    case NR__F_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, p, sizeof(bits));
        put_le(b, bits, 8);
        break;
    }
    default: break;
    }
}

/* ---- the emitter (cfg_walk.c) ---- */

#define MAX_DEPTH 32 /* the schema nests 6 deep */

typedef struct {
    nr_buf_t *b;
    size_t open[MAX_DEPTH]; /* where each open length-delimited record's body starts */
    int n_open;
    bool packed; /* inside a packed repeated field: numbers without tags */
} pb_t;

static void record_open(pb_t *w, uint32_t num)
{
    w->open[w->n_open++] = len_open(w->b, num);
}

static void record_close(pb_t *w)
{
    len_close(w->b, w->open[--w->n_open]);
}

/* A sub-message is a length-delimited record under its field's number; the root is not. */
static void msg_begin(void *ctx, const nr__cfg_field_t *f)
{
    if (f != NULL)
        record_open(ctx, f->num);
}

static void msg_end(void *ctx, const nr__cfg_field_t *f)
{
    if (f != NULL)
        record_close(ctx);
}

static bool packs(const nr__cfg_field_t *f)
{
    return f->type != NR__F_STRING && f->type != NR__F_MSG && f->type != NR__F_SHAPEMAP;
}

/* Repeated numbers go packed, in one record; strings, messages and map entries one record
 * each. */
static void field_begin(void *ctx, const nr__cfg_field_t *f, bool list, size_t n)
{
    pb_t *w = ctx;
    if (list && packs(f)) {
        record_open(w, f->num);
        w->packed = true;
    }
}

static void field_end(void *ctx, const nr__cfg_field_t *f, bool list, size_t n)
{
    pb_t *w = ctx;
    if (list && packs(f)) {
        record_close(w);
        w->packed = false;
    }
}

static void scalar(void *ctx, const nr__cfg_field_t *f, const void *p)
{
    pb_t *w = ctx;
    if (f->type == NR__F_STRING) {
        put_bytes(w->b, f->num, *(char *const *)p);
        return;
    }
    if (!w->packed)
        put_tag(w->b, f->num, wire_type(f));
    put_number(w->b, f, p);
}

/* A map entry is a message {key = 1, value = 2} under the map's number, both written even
 * when zero, as protobuf writes map entries. */
static void entry_begin(void *ctx, const nr__cfg_field_t *f, const nr__cfg_field_t *kf,
                        const void *key)
{
    record_open(ctx, f->num);
    scalar(ctx, kf, key);
}

static void entry_end(void *ctx, const nr__cfg_field_t *f)
{
    record_close(ctx);
}

static const nr__cfg_emitter_t pb_emitter = {
    .by_number = true,   /* protobuf writes fields in field-number order */
    .all_fields = false, /* proto3: default scalars and empty repeated fields are left out */
    .msg_begin = msg_begin,
    .msg_end = msg_end,
    .field_begin = field_begin,
    .field_end = field_end,
    .scalar = scalar,
    .entry_begin = entry_begin,
    .entry_end = entry_end,
};

char *nr_cfg_to_pb(const nr_model_config_t *cfg, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    pb_t w = {.b = &b};
    nr__cfg_walk(&pb_emitter, &w, &nr__cfg_model_config_msg, cfg);
    size_t n;
    char *s = nr_buf_steal(&b, &n);
    if (len)
        *len = n;
    return s;
}
