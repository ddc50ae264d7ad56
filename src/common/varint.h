/* varint.h - protobuf's base-128 varint, for the places that write or read
 * protobuf by hand (config/config_pb.c: ModelConfig; frontends/grpc: the raw
 * outputs appended after protobuf-c's header; tools/perf: max_batch_size from
 * a ModelConfig). Header-only, pure.
 */
#ifndef NR_VARINT_H
#define NR_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define NR_VARINT_MAX 10 /* bytes in the longest varint (a 64-bit value) */

/* Writes v into out[0..NR_VARINT_MAX); returns the bytes written. */
static inline size_t nr_varint_put(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

/* The bytes nr_varint_put would write for v. */
static inline size_t nr_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Reads a varint from p[0..n); returns the bytes it took, 0 if it is cut off or too long. */
static inline size_t nr_varint_get(const uint8_t *p, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < n && i < NR_VARINT_MAX; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

#endif
