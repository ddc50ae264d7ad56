/* config_pb.c - nr_model_config_t -> inference.ModelConfig in protobuf binary.
 *
 * The gRPC ModelConfig RPC answers ModelConfigResponse{ModelConfig config = 1}.
 * This walks the schema tables of cfg_fields.c, the ones config_json.c prints
 * JSON from, and writes the proto3 wire format the way protobuf's C++
 * serializer does:
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

static void put_msg(nr_buf_t *b, const nr__cfg_msg_t *m, const void *base);

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

/* One value of a field with its tag: a string, a message or a number. */
static void put_value(nr_buf_t *b, const nr__cfg_field_t *f, const void *p)
{
    if (f->type == NR__F_STRING) {
        put_bytes(b, f->num, *(char *const *)p);
    } else if (f->type == NR__F_MSG) {
        size_t body = len_open(b, f->num);
        put_msg(b, f->sub, p);
        len_close(b, body);
    } else {
        put_tag(b, f->num, wire_type(f));
        put_number(b, f, p);
    }
}

/* A map entry under field number num: key = 1 and value = 2, both written
 * even when zero, as protobuf writes map entries. */
static void put_entry(nr_buf_t *b, uint32_t num, const nr__cfg_msg_t *entry, const void *e)
{
    size_t body = len_open(b, num);
    for (size_t i = 0; i < entry->n_fields; i++) {
        const nr__cfg_field_t *f = &entry->fields[i];
        put_value(b, f, NR__CAT(e, f->off, char));
    }
    len_close(b, body);
}

static void put_shapemap(nr_buf_t *b, const nr__cfg_field_t *f, const void *base)
{
    size_t n = *NR__CAT(base, f->off_n, size_t);
    typedef char **strv_t;
    char *const *names = *NR__CAT(base, f->off, strv_t);
    const nr_cfg_dims_t *dims = *NR__CAT(base, f->off_aux, nr_cfg_dims_t *);
    for (size_t i = 0; i < n; i++) {
        nr__cfg_shape_entry_t e = {names[i], dims[i]};
        put_entry(b, f->num, &nr__cfg_shape_entry_msg, &e);
    }
}

static void put_repeated(nr_buf_t *b, const nr__cfg_field_t *f, const void *base)
{
    size_t n = *NR__CAT(base, f->off_n, size_t);
    const char *arr = f->rep == NR__R_FIX2 ? NR__CAT(base, f->off, char)
                                           : *NR__CAT(base, f->off, char *);
    if (f->rep == NR__R_FIX2 && n > 2)
        n = 2; /* as config_json.c: the inline array holds two */
    if (n == 0)
        return;
    size_t es = nr__cfg_elem_size(f);
    if (f->type == NR__F_STRING || f->type == NR__F_MSG) {
        for (size_t i = 0; i < n; i++) {
            if (f->flags & NR__FL_MAP)
                put_entry(b, f->num, f->sub, arr + i * es);
            else
                put_value(b, f, arr + i * es);
        }
        return;
    }
    size_t body = len_open(b, f->num); /* packed */
    for (size_t i = 0; i < n; i++)
        put_number(b, f, arr + i * es);
    len_close(b, body);
}

static void put_field(nr_buf_t *b, const nr__cfg_field_t *f, const void *base)
{
    if (f->type == NR__F_SHAPEMAP) {
        put_shapemap(b, f, base);
    } else if (f->rep != NR__R_ONE) {
        put_repeated(b, f, base);
    } else if (f->type == NR__F_MSG) {
        if (nr__cfg_msg_present(f, base))
            put_value(b, f, NR__CAT(base, f->off, char));
    } else if (f->oneof != NULL) {
        if (*NR__CAT(base, f->off_oneof, int) == f->oneof_val)
            put_value(b, f, NR__CAT(base, f->off, char));
    } else if (!nr__cfg_scalar_is_default(f, base)) {
        put_value(b, f, NR__CAT(base, f->off, char));
    }
}

static void put_msg(nr_buf_t *b, const nr__cfg_msg_t *m, const void *base)
{
    for (const nr__cfg_field_t *f = nr__cfg_next_field(m, 0); f != NULL;
         f = nr__cfg_next_field(m, f->num))
        put_field(b, f, base);
}

char *nr_cfg_to_pb(const nr_model_config_t *cfg, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    put_msg(&b, &nr__cfg_model_config_msg, cfg);
    size_t n;
    char *s = nr_buf_steal(&b, &n);
    if (len)
        *len = n;
    return s;
}
