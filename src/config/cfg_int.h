/* cfg_int.h - internal to src/config: the ModelConfig schema as data.
 *
 * One table per proto message (cfg_fields.c) lists its fields in proto
 * declaration order (= Triton's JSON order) with field number, kind, offsetof
 * and sub-table. model_config.c parses the pbtxt tree through these tables,
 * config_from_json.c reads protobuf JSON through them (both store values with
 * the helpers of cfg_store.c); one walker (cfg_walk.c) writes through them with an
 * emitter per format: config_json.c (Triton's JSON), config_pb.c (protobuf binary),
 * config_pbtxt.c (text format); and nr__cfg_free_msg frees through them. Also the validation entry points shared by the
 * validate*.c files.
 */
#ifndef NR_CFG_INT_H
#define NR_CFG_INT_H

#include "model_config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NR__CFG_NONE ((size_t)-1)

typedef enum {
    NR__F_STRING,
    NR__F_BOOL,
    NR__F_INT32,
    NR__F_UINT32,
    NR__F_INT64,
    NR__F_UINT64,
    NR__F_FLOAT,
    NR__F_DOUBLE,
    NR__F_ENUM,     /* stored as int */
    NR__F_MSG,      /* sub-message at base + off (its own table's offsets are relative to that) */
    NR__F_SHAPEMAP, /* map<string, Shape{dim}>: char **names at off, nr_cfg_dims_t *at off_aux */
} nr__cfg_ftype_t;

typedef enum {
    NR__R_ONE,  /* singular */
    NR__R_PTR,  /* repeated: T *array at off, size_t count at off_n */
    NR__R_FIX2, /* repeated, inline T[2] at off, size_t count at off_n (may exceed 2) */
} nr__cfg_rep_t;

#define NR__FL_STR64 1u /* 64-bit value Triton leaves as a JSON string */
#define NR__FL_MAP 2u   /* repeated message of {key, value}: a proto map */
#define NR__FL_ALIAS 4u /* alternative name for the previous field: parsed, never printed; num 0 */

typedef struct {
    const char *name;
    int value;
} nr__cfg_enum_val_t;

typedef struct {
    const char *name; /* "inference.DataType" */
    const nr__cfg_enum_val_t *vals;
    size_t n;
} nr__cfg_enum_t;

struct nr__cfg_msg_s;

typedef struct {
    const char *name;
    uint32_t num;  /* proto field number (wire tag); 0 for NR__FL_ALIAS */
    uint8_t type;  /* nr__cfg_ftype_t */
    uint8_t rep;   /* nr__cfg_rep_t */
    uint8_t flags; /* NR__FL_* */
    size_t off;
    size_t off_n;   /* count, for repeated fields and SHAPEMAP */
    size_t off_aux; /* MSG: bool has-flag (NR__CFG_NONE: none); SHAPEMAP: dims array */
    const struct nr__cfg_msg_s *sub;
    const nr__cfg_enum_t *en;
    const char *oneof; /* oneof name, NULL if none */
    size_t off_oneof;  /* int selector written when this member is set */
    int oneof_val;
} nr__cfg_field_t;

typedef struct nr__cfg_msg_s {
    const char *type_name; /* "inference.ModelConfig" */
    size_t size;           /* element size when repeated */
    const nr__cfg_field_t *fields;
    size_t n_fields;
} nr__cfg_msg_t;

extern const nr__cfg_msg_t nr__cfg_model_config_msg;

/* One entry of a map<string, Shape{dim}> (cuda graph_spec input), parsed and
 * printed through nr__cfg_shape_entry_msg then kept as parallel arrays. */
typedef struct {
    char *key;
    nr_cfg_dims_t dims;
} nr__cfg_shape_entry_t;
extern const nr__cfg_msg_t nr__cfg_shape_entry_msg;

size_t nr__cfg_elem_size(const nr__cfg_field_t *f);
/* True when the field holds its proto3 zero value (singular scalars only). */
bool nr__cfg_scalar_is_default(const nr__cfg_field_t *f, const void *base);
/* True when a singular MSG field counts as set (has-flag and oneof selector). */
bool nr__cfg_msg_present(const nr__cfg_field_t *f, const void *base);
/* True when nothing in the message differs from its default (protobuf ByteSize 0). */
bool nr__cfg_msg_is_empty(const nr__cfg_msg_t *m, const void *base);
void nr__cfg_free_msg(const nr__cfg_msg_t *m, void *base);
const char *nr__cfg_enum_name(const nr__cfg_enum_t *en, int value); /* NULL if unknown */
/* The field numbered next after `after` (0: the first), aliases (num 0) never: the order
 * protobuf writes fields in, binary and text alike. NULL after the last. */
const nr__cfg_field_t *nr__cfg_next_field(const nr__cfg_msg_t *m, uint32_t after);

/* ---- writing a config (cfg_walk.c): one walker, an emitter per format ---- */

/* What a writer spells; the walker calls it in document order. */
typedef struct {
    bool by_number;  /* fields in field-number order (protobuf's binary and text printers), else
                      * in declaration order (Triton's JSON) */
    bool all_fields; /* also singular scalars at their default, and empty repeated fields and
                      * maps (protobuf's JSON printer with always_print_primitive_fields) */
    /* A message value: the root (f NULL), the value of a message field f (singular, one of a
     * repeated one, or a map entry's value field); its fields come between. */
    void (*msg_begin)(void *ctx, const nr__cfg_field_t *f);
    void (*msg_end)(void *ctx, const nr__cfg_field_t *f);
    /* A field written: list for a repeated field or a map (n values or entries, possibly 0),
     * else one value. */
    void (*field_begin)(void *ctx, const nr__cfg_field_t *f, bool list, size_t n);
    void (*field_end)(void *ctx, const nr__cfg_field_t *f, bool list, size_t n);
    /* One value of non-message field f at p. */
    void (*scalar)(void *ctx, const nr__cfg_field_t *f, const void *p);
    /* One entry of map field f: its key (field kf) at key; the entry's value follows
     * (msg_begin/.../msg_end or scalar, of the entry's value field), then entry_end. */
    void (*entry_begin)(void *ctx, const nr__cfg_field_t *f, const nr__cfg_field_t *kf,
                        const void *key);
    void (*entry_end)(void *ctx, const nr__cfg_field_t *f);
} nr__cfg_emitter_t;

/* Walks message m at base through e. */
void nr__cfg_walk(const nr__cfg_emitter_t *e, void *ctx, const nr__cfg_msg_t *m,
                  const void *base);

/* ---- storing values (cfg_store.c): what the pbtxt and JSON readers share -- */

/* Values per repeated field (and entries per map). Far above any real model;
 * it bounds the quadratic map-key and name-uniqueness checks on hostile input. */
#define NR__CFG_MAX_REPEATED 16384

/* The field named name[0, n) (no NUL needed); json_names: its lowerCamelCase
 * JSON name (protobuf's json_name, "maxBatchSize") matches too. NULL if none. */
const nr__cfg_field_t *nr__cfg_find_field(const nr__cfg_msg_t *m, const char *name, size_t n,
                                          bool json_names);
/* f's index in m for tracking which fields were given: an alias counts as its
 * original. A reader's `seen` array is indexed by it. */
size_t nr__cfg_field_index(const nr__cfg_msg_t *m, const nr__cfg_field_t *f);
/* Another member of f's oneof already given (seen[index]), or NULL. */
const nr__cfg_field_t *nr__cfg_oneof_rival(const nr__cfg_msg_t *m, const nr__cfg_field_t *f,
                                           const unsigned char *seen);
/* Records that singular field f is given: its oneof selector, a message's has-flag. */
void nr__cfg_mark_set(const nr__cfg_field_t *f, void *base);
/* Whether the integer (sign, magnitude) fits a field of integer type `type`
 * (NR__F_INT32 for enums); an unsigned type takes no negative value but -0. */
bool nr__cfg_int_fits(uint8_t type, bool neg, uint64_t mag);
/* Stores a fitting integer in a slot of integer type `type` (NR__F_ENUM too). */
void nr__cfg_store_int(uint8_t type, void *slot, bool neg, uint64_t mag);
/* The value of the enum value named name[0, n); any_case: ASCII case ignored. */
bool nr__cfg_enum_value(const nr__cfg_enum_t *en, const char *name, size_t n, bool any_case,
                        int *out);
/* A new zeroed element of repeated field f (NR__R_PTR or NR__R_FIX2) counted
 * in: the slot to store it in. A FIX2 field past its two inline values is
 * counted but its value goes to `scratch` (16 bytes) and is dropped. */
void *nr__cfg_add_elem(const nr__cfg_field_t *f, void *base, void *scratch);
/* Map semantics after appending an entry to map field f: an earlier entry
 * with the same key is replaced by the new one, in place. */
void nr__cfg_map_dedupe(const nr__cfg_field_t *f, void *base);
/* Puts entry e (taken over) into SHAPEMAP field f; an entry with its key is replaced. */
void nr__cfg_shapemap_put(const nr__cfg_field_t *f, void *base, nr__cfg_shape_entry_t *e);

/* Parts of nr_cfg_validate outside validate.c (validate_io.c, validate_sched.c).
 * Each returns NULL or an INVALID_ARG status worded as Triton words it. */
nr_status_t *nr__cfg_check_io(const nr_model_config_t *cfg);       /* ValidateModelIOConfig */
nr_status_t *nr__cfg_check_sequence(const nr_model_config_t *cfg); /* sequence_batching rules */
nr_status_t *nr__cfg_check_ensemble(const nr_model_config_t *cfg); /* ValidateEnsembleSchedulingConfig */

#define NR__AT(base, off, T) ((T *)((char *)(base) + (off)))
#define NR__CAT(base, off, T) ((const T *)((const char *)(base) + (off)))

#endif
