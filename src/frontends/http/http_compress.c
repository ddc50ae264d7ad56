/* http_compress.c - HTTP body compression with zlib (Triton's compression
 * extension). Requests: Content-Encoding gzip / deflate (zlib-wrapped; both
 * auto-detected when inflating, as Triton does) / identity. Responses: the
 * Accept-Encoding entry with the highest q-weight among identity, gzip and
 * deflate; ties keep the first one listed (Triton's rule).
 *
 * Inflating is bounded by the caller's maximum so a small compressed body
 * cannot expand past --http-max-input-size. Pure functions, no locks.
 */
#include "http_int.h"

#include "../../common/alloc.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

nr_http_enc_t nr_http_request_encoding(const char *ce)
{
    if (ce == NULL || ce[0] == '\0' || strcmp(ce, "identity") == 0)
        return NR_ENC_IDENTITY;
    if (strcmp(ce, "gzip") == 0)
        return NR_ENC_GZIP;
    if (strcmp(ce, "deflate") == 0)
        return NR_ENC_DEFLATE;
    return NR_ENC_UNKNOWN;
}

/* One comma-separated entry "type[;q=w]" of Accept-Encoding. Leading spaces
 * are skipped; the type runs to ";q=" or the end (trailing spaces make it
 * unknown, as in Triton). Returns false for a malformed entry. */
static bool parse_entry(const char *p, size_t n, nr_http_enc_t *enc, double *w)
{
    while (n > 0 && *p == ' ')
        p++, n--;
    if (n == 0)
        return false;
    size_t tlen = n;
    *w = 1.0;
    for (size_t i = 0; i + 3 <= n; i++) {
        if (p[i] == ';' && p[i + 1] == 'q' && p[i + 2] == '=') {
            tlen = i;
            char tmp[32];
            size_t wl = n - i - 3;
            if (wl == 0 || wl >= sizeof(tmp))
                return false;
            memcpy(tmp, p + i + 3, wl);
            tmp[wl] = '\0';
            char *end;
            *w = strtod(tmp, &end);
            if (end == tmp)
                return false;
            break;
        }
    }
    if (tlen == 0)
        return false;
    if (tlen == 8 && memcmp(p, "identity", 8) == 0)
        *enc = NR_ENC_IDENTITY;
    else if (tlen == 4 && memcmp(p, "gzip", 4) == 0)
        *enc = NR_ENC_GZIP;
    else if (tlen == 7 && memcmp(p, "deflate", 7) == 0)
        *enc = NR_ENC_DEFLATE;
    else
        *enc = NR_ENC_UNKNOWN;
    return true;
}

nr_http_enc_t nr_http_response_encoding(const char *ae)
{
    if (ae == NULL)
        return NR_ENC_IDENTITY;
    nr_http_enc_t best = NR_ENC_IDENTITY;
    double best_w = 0;
    const char *p = ae;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        nr_http_enc_t e;
        double w;
        if (parse_entry(p, n, &e, &w) && e != NR_ENC_UNKNOWN && w > best_w) {
            best = e;
            best_w = w;
        }
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return best;
}

nr_status_t *nr_http_inflate(const char *in, size_t n, uint64_t max, size_t lead, char **out,
                             size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    /* 15 + 32: zlib or gzip header, detected automatically */
    if (inflateInit2(&zs, 15 + 32) != Z_OK)
        return nr_status_new(NR_INTERNAL, "failed to initialize the decompressor");
    size_t cap = n < 4096 ? 4096 : n * 4;
    if (cap > max + 1)
        cap = (size_t)max + 1;
    char *buf = malloc(lead + (cap ? cap : 1));
    if (buf == NULL) {
        inflateEnd(&zs);
        return nr_status_new(NR_INVALID_ARG, "unable to allocate %zu bytes to decompress the request body", cap);
    }
    size_t len = 0;
    const unsigned char *src = (const unsigned char *)in;
    size_t left = n;
    int rc = Z_OK;
    nr_status_t *st = NULL;
    while (rc != Z_STREAM_END) {
        if (len == cap) {
            if (cap > max) {
                st = nr_status_new(NR_INVALID_ARG,
                                   "decompressed request body size exceeds the maximum allowed "
                                   "value of %llu bytes (--http-max-input-size)",
                                   (unsigned long long)max);
                break;
            }
            size_t ncap = cap * 2 > max + 1 ? (size_t)max + 1 : cap * 2;
            char *nb = realloc(buf, lead + ncap);
            if (nb == NULL) {
                st = nr_status_new(NR_INVALID_ARG,
                                   "unable to allocate %zu bytes to decompress the request body",
                                   ncap);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        uInt chunk_in = left > (1u << 30) ? (1u << 30) : (uInt)left;
        uInt chunk_out = cap - len > (1u << 30) ? (1u << 30) : (uInt)(cap - len);
        zs.next_in = (Bytef *)src;
        zs.avail_in = chunk_in;
        zs.next_out = (Bytef *)buf + lead + len;
        zs.avail_out = chunk_out;
        rc = inflate(&zs, Z_NO_FLUSH);
        size_t used_in = chunk_in - zs.avail_in;
        size_t produced = chunk_out - zs.avail_out;
        src += used_in;
        left -= used_in;
        len += produced;
        if (rc == Z_STREAM_END)
            break;
        if (rc == Z_BUF_ERROR && left == 0 && produced == 0) {
            st = nr_status_new(NR_INVALID_ARG,
                               "failed to decompress the request body: unexpected end of data");
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = nr_status_new(NR_INVALID_ARG, "failed to decompress the request body: %s",
                               zs.msg ? zs.msg : "invalid data");
            break;
        }
    }
    inflateEnd(&zs);
    if (st == NULL && len > max)
        st = nr_status_new(NR_INVALID_ARG,
                           "decompressed request body size of %zu bytes exceeds the maximum "
                           "allowed value of %llu bytes (--http-max-input-size)",
                           len, (unsigned long long)max);
    if (st != NULL) {
        free(buf);
        return st;
    }
    *out = buf;
    *out_len = len;
    return NULL;
}

nr_status_t *nr_http_deflate(nr_http_enc_t enc, const struct iovec *iov, size_t n_iov,
                             nr_buf_t *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    int wbits = enc == NR_ENC_GZIP ? 15 + 16 : 15;
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return nr_status_new(NR_INTERNAL, "failed to initialize the compressor");
    size_t total = 0;
    for (size_t i = 0; i < n_iov; i++)
        total += iov[i].iov_len;
    nr_buf_reset(out);
    if (!nr_buf_try_reserve(out,
                            deflateBound(&zs, total > ULONG_MAX ? ULONG_MAX : (uLong)total) + 64)) {
        deflateEnd(&zs);
        return nr_status_new(NR_UNAVAILABLE, "unable to allocate memory to compress the response");
    }
    size_t i = 0, off = 0;
    int rc = Z_OK;
    for (;;) {
        while (i < n_iov && off == iov[i].iov_len)
            i++, off = 0;
        bool last = i == n_iov;
        uInt in_n = 0;
        if (!last) {
            size_t l = iov[i].iov_len - off;
            in_n = l > (1u << 30) ? (1u << 30) : (uInt)l;
            zs.next_in = (Bytef *)iov[i].iov_base + off;
        } else {
            zs.next_in = NULL;
        }
        zs.avail_in = in_n;
        if (out->cap - out->len < 1024 && !nr_buf_try_reserve(out, out->cap)) {
            deflateEnd(&zs);
            return nr_status_new(NR_UNAVAILABLE,
                                 "unable to allocate memory to compress the response");
        }
        uInt out_n = (uInt)(out->cap - out->len - 1 > (1u << 30) ? (1u << 30)
                                                                 : out->cap - out->len - 1);
        zs.next_out = (Bytef *)out->data + out->len;
        zs.avail_out = out_n;
        rc = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
        off += in_n - zs.avail_in;
        out->len += out_n - zs.avail_out;
        if (rc == Z_STREAM_END)
            break;
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            deflateEnd(&zs);
            return nr_status_new(NR_INTERNAL, "failed to compress the response");
        }
    }
    deflateEnd(&zs);
    out->data[out->len] = '\0';
    return NULL;
}
