/* dtoa.c - nr_buf_double: doubles printed exactly as Triton prints them in JSON:
 * rapidjson's Writer, i.e. Grisu2 (Loitsch, "Printing Floating-Point Numbers
 * Quickly and Accurately with Integers", PLDI 2010) followed by rapidjson's
 * layout rules (100.0, 1e-7, 1.0000000116860974e-7, -0.0, NaN, Infinity).
 *
 * Grisu2 as rapidjson 1.1 implements it does not always pick the digit
 * string closest to the value (FLT_MAX widened prints 3.4028234663852887e38,
 * not ...886e38; 0.3f prints 0.30000001192092898), so a shortest-round-trip
 * printer cannot reproduce Triton's bytes; this one follows the same steps,
 * with the same 64-bit cached powers of ten (10^-348 .. 10^340 in steps of
 * 8, significands rounded to nearest).
 *
 * Used for every JSON number nereid prints (infer responses, config JSON).
 * Pure and thread-safe.
 */
#include "buf.h"

#include <stdint.h>

#include <math.h>
#include <string.h>

typedef struct {
    uint64_t f;
    int e;
} diyfp_t;

static const struct {
    uint64_t f;
    int e;
} cached_pow[87] = {
    {0xfa8fd5a0081c0288ull, -1220}, /* 1e-348 */
    {0xbaaee17fa23ebf76ull, -1193}, /* 1e-340 */
    {0x8b16fb203055ac76ull, -1166}, /* 1e-332 */
    {0xcf42894a5dce35eaull, -1140}, /* 1e-324 */
    {0x9a6bb0aa55653b2dull, -1113}, /* 1e-316 */
    {0xe61acf033d1a45dfull, -1087}, /* 1e-308 */
    {0xab70fe17c79ac6caull, -1060}, /* 1e-300 */
    {0xff77b1fcbebcdc4full, -1034}, /* 1e-292 */
    {0xbe5691ef416bd60cull, -1007}, /* 1e-284 */
    {0x8dd01fad907ffc3cull, -980}, /* 1e-276 */
    {0xd3515c2831559a83ull, -954}, /* 1e-268 */
    {0x9d71ac8fada6c9b5ull, -927}, /* 1e-260 */
    {0xea9c227723ee8bcbull, -901}, /* 1e-252 */
    {0xaecc49914078536dull, -874}, /* 1e-244 */
    {0x823c12795db6ce57ull, -847}, /* 1e-236 */
    {0xc21094364dfb5637ull, -821}, /* 1e-228 */
    {0x9096ea6f3848984full, -794}, /* 1e-220 */
    {0xd77485cb25823ac7ull, -768}, /* 1e-212 */
    {0xa086cfcd97bf97f4ull, -741}, /* 1e-204 */
    {0xef340a98172aace5ull, -715}, /* 1e-196 */
    {0xb23867fb2a35b28eull, -688}, /* 1e-188 */
    {0x84c8d4dfd2c63f3bull, -661}, /* 1e-180 */
    {0xc5dd44271ad3cdbaull, -635}, /* 1e-172 */
    {0x936b9fcebb25c996ull, -608}, /* 1e-164 */
    {0xdbac6c247d62a584ull, -582}, /* 1e-156 */
    {0xa3ab66580d5fdaf6ull, -555}, /* 1e-148 */
    {0xf3e2f893dec3f126ull, -529}, /* 1e-140 */
    {0xb5b5ada8aaff80b8ull, -502}, /* 1e-132 */
    {0x87625f056c7c4a8bull, -475}, /* 1e-124 */
    {0xc9bcff6034c13053ull, -449}, /* 1e-116 */
    {0x964e858c91ba2655ull, -422}, /* 1e-108 */
    {0xdff9772470297ebdull, -396}, /* 1e-100 */
    {0xa6dfbd9fb8e5b88full, -369}, /* 1e-92 */
    {0xf8a95fcf88747d94ull, -343}, /* 1e-84 */
    {0xb94470938fa89bcfull, -316}, /* 1e-76 */
    {0x8a08f0f8bf0f156bull, -289}, /* 1e-68 */
    {0xcdb02555653131b6ull, -263}, /* 1e-60 */
    {0x993fe2c6d07b7facull, -236}, /* 1e-52 */
    {0xe45c10c42a2b3b06ull, -210}, /* 1e-44 */
    {0xaa242499697392d3ull, -183}, /* 1e-36 */
    {0xfd87b5f28300ca0eull, -157}, /* 1e-28 */
    {0xbce5086492111aebull, -130}, /* 1e-20 */
    {0x8cbccc096f5088ccull, -103}, /* 1e-12 */
    {0xd1b71758e219652cull, -77}, /* 1e-4 */
    {0x9c40000000000000ull, -50}, /* 1e4 */
    {0xe8d4a51000000000ull, -24}, /* 1e12 */
    {0xad78ebc5ac620000ull, 3}, /* 1e20 */
    {0x813f3978f8940984ull, 30}, /* 1e28 */
    {0xc097ce7bc90715b3ull, 56}, /* 1e36 */
    {0x8f7e32ce7bea5c70ull, 83}, /* 1e44 */
    {0xd5d238a4abe98068ull, 109}, /* 1e52 */
    {0x9f4f2726179a2245ull, 136}, /* 1e60 */
    {0xed63a231d4c4fb27ull, 162}, /* 1e68 */
    {0xb0de65388cc8ada8ull, 189}, /* 1e76 */
    {0x83c7088e1aab65dbull, 216}, /* 1e84 */
    {0xc45d1df942711d9aull, 242}, /* 1e92 */
    {0x924d692ca61be758ull, 269}, /* 1e100 */
    {0xda01ee641a708deaull, 295}, /* 1e108 */
    {0xa26da3999aef774aull, 322}, /* 1e116 */
    {0xf209787bb47d6b85ull, 348}, /* 1e124 */
    {0xb454e4a179dd1877ull, 375}, /* 1e132 */
    {0x865b86925b9bc5c2ull, 402}, /* 1e140 */
    {0xc83553c5c8965d3dull, 428}, /* 1e148 */
    {0x952ab45cfa97a0b3ull, 455}, /* 1e156 */
    {0xde469fbd99a05fe3ull, 481}, /* 1e164 */
    {0xa59bc234db398c25ull, 508}, /* 1e172 */
    {0xf6c69a72a3989f5cull, 534}, /* 1e180 */
    {0xb7dcbf5354e9beceull, 561}, /* 1e188 */
    {0x88fcf317f22241e2ull, 588}, /* 1e196 */
    {0xcc20ce9bd35c78a5ull, 614}, /* 1e204 */
    {0x98165af37b2153dfull, 641}, /* 1e212 */
    {0xe2a0b5dc971f303aull, 667}, /* 1e220 */
    {0xa8d9d1535ce3b396ull, 694}, /* 1e228 */
    {0xfb9b7cd9a4a7443cull, 720}, /* 1e236 */
    {0xbb764c4ca7a44410ull, 747}, /* 1e244 */
    {0x8bab8eefb6409c1aull, 774}, /* 1e252 */
    {0xd01fef10a657842cull, 800}, /* 1e260 */
    {0x9b10a4e5e9913129ull, 827}, /* 1e268 */
    {0xe7109bfba19c0c9dull, 853}, /* 1e276 */
    {0xac2820d9623bf429ull, 880}, /* 1e284 */
    {0x80444b5e7aa7cf85ull, 907}, /* 1e292 */
    {0xbf21e44003acdd2dull, 933}, /* 1e300 */
    {0x8e679c2f5e44ff8full, 960}, /* 1e308 */
    {0xd433179d9c8cb841ull, 986}, /* 1e316 */
    {0x9e19db92b4e31ba9ull, 1013}, /* 1e324 */
    {0xeb96bf6ebadf77d9ull, 1039}, /* 1e332 */
    {0xaf87023b9bf0ee6bull, 1066}, /* 1e340 */
};

static diyfp_t diy_mul(diyfp_t a, diyfp_t b)
{
    unsigned __int128 p = (unsigned __int128)a.f * b.f;
    uint64_t h = (uint64_t)(p >> 64), l = (uint64_t)p;
    if (l & (1ull << 63))
        h++; /* round */
    return (diyfp_t){h, a.e + b.e + 64};
}

static diyfp_t diy_normalize(diyfp_t v)
{
    int s = __builtin_clzll(v.f);
    return (diyfp_t){v.f << s, v.e - s};
}

/* The boundaries m- and m+ of v (halfway to its neighbours), same exponent. */
static void boundaries(diyfp_t v, diyfp_t *minus, diyfp_t *plus)
{
    const uint64_t hidden = 1ull << 52;
    diyfp_t pl = {(v.f << 1) + 1, v.e - 1};
    while (!(pl.f & (hidden << 1))) {
        pl.f <<= 1;
        pl.e--;
    }
    pl.f <<= 64 - 52 - 2;
    pl.e -= 64 - 52 - 2;
    diyfp_t mi = v.f == hidden ? (diyfp_t){(v.f << 2) - 1, v.e - 2}
                               : (diyfp_t){(v.f << 1) - 1, v.e - 1};
    mi.f <<= mi.e - pl.e;
    mi.e = pl.e;
    *minus = mi;
    *plus = pl;
}

static diyfp_t cached_power(int e, int *k10)
{
    double dk = (-61 - e) * 0.30102999566398114 + 347;
    int k = (int)dk;
    if (dk - k > 0.0)
        k++;
    unsigned idx = (unsigned)((k >> 3) + 1);
    *k10 = -(-348 + (int)(idx << 3));
    return (diyfp_t){cached_pow[idx].f, cached_pow[idx].e};
}

static void round_weed(char *buf, int len, uint64_t delta, uint64_t rest, uint64_t ten_kappa,
                       uint64_t wp_w)
{
    while (rest < wp_w && delta - rest >= ten_kappa &&
           (rest + ten_kappa < wp_w || wp_w - rest > rest + ten_kappa - wp_w)) {
        buf[len - 1]--;
        rest += ten_kappa;
    }
}

static int count_digits(uint32_t n)
{
    int d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

static void digit_gen(diyfp_t w, diyfp_t mp, uint64_t delta, char *buf, int *len, int *k10)
{
    static const uint64_t pow10[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    const int shift = -mp.e;
    const uint64_t one = 1ull << shift;
    const uint64_t wp_w = mp.f - w.f;
    uint32_t p1 = (uint32_t)(mp.f >> shift);
    uint64_t p2 = mp.f & (one - 1);
    int kappa = count_digits(p1);
    *len = 0;
    while (kappa > 0) {
        uint32_t div = (uint32_t)pow10[kappa - 1];
        uint32_t d = p1 / div;
        p1 %= div;
        if (d || *len)
            buf[(*len)++] = (char)('0' + d);
        kappa--;
        uint64_t tmp = ((uint64_t)p1 << shift) + p2;
        if (tmp <= delta) {
            *k10 += kappa;
            round_weed(buf, *len, delta, tmp, pow10[kappa] << shift, wp_w);
            return;
        }
    }
    for (;;) {
        p2 *= 10;
        delta *= 10;
        char d = (char)(p2 >> shift);
        if (d || *len)
            buf[(*len)++] = (char)('0' + d);
        p2 &= one - 1;
        kappa--;
        if (p2 < delta) {
            *k10 += kappa;
            int idx = -kappa;
            /* rapidjson 1.1 (what Triton builds) scales only by 10^0..10^8
             * here and skips the rounding step beyond: its digits then stay
             * those of the upper bound (FLT_MAX -> ...887e38) */
            round_weed(buf, *len, delta, p2, one, wp_w * (idx < 9 ? pow10[idx] : 0));
            return;
        }
    }
}

/* v > 0, finite: digits into buf, v ~= digits * 10^k10 */
static int grisu2(double v, char *buf, int *k10)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    int be = (int)((bits >> 52) & 0x7FF);
    uint64_t sig = bits & ((1ull << 52) - 1);
    diyfp_t d = be ? (diyfp_t){sig | (1ull << 52), be - 1075} : (diyfp_t){sig, -1074};
    diyfp_t m_minus, m_plus;
    boundaries(d, &m_minus, &m_plus);
    diyfp_t c = cached_power(m_plus.e, k10);
    diyfp_t w = diy_mul(diy_normalize(d), c);
    diyfp_t wp = diy_mul(m_plus, c);
    diyfp_t wm = diy_mul(m_minus, c);
    wm.f++;
    wp.f--;
    int len;
    digit_gen(w, wp, wp.f - wm.f, buf, &len, k10);
    return len;
}

/* "e<exp>" at p; returns the end. */
static char *put_exp(char *p, int e)
{
    *p++ = 'e';
    if (e < 0) {
        *p++ = '-';
        e = -e;
    }
    if (e >= 100)
        *p++ = (char)('0' + e / 100);
    if (e >= 10)
        *p++ = (char)('0' + e / 10 % 10);
    *p++ = (char)('0' + e % 10);
    return p;
}

char *nr_dtoa(char *out, double v)
{
    char *p = out;
    if (isnan(v)) {
        memcpy(p, "NaN", 3);
        return p + 3;
    }
    if (isinf(v)) {
        if (v < 0)
            *p++ = '-';
        memcpy(p, "Infinity", 8);
        return p + 8;
    }
    if (signbit(v)) {
        *p++ = '-';
        v = -v;
    }
    if (v == 0) {
        memcpy(p, "0.0", 3);
        return p + 3;
    }
    char d[32];
    int k;
    int len = grisu2(v, d, &k);
    int kk = len + k; /* 10^(kk-1) <= v < 10^kk */
    if (k >= 0 && kk <= 21) { /* 1234e7 -> 12340000000.0 */
        memcpy(p, d, (size_t)len);
        p += len;
        for (int i = len; i < kk; i++)
            *p++ = '0';
        *p++ = '.';
        *p++ = '0';
    } else if (kk > 0 && kk <= 21) { /* 1234e-2 -> 12.34 */
        memcpy(p, d, (size_t)kk);
        p += kk;
        *p++ = '.';
        memcpy(p, d + kk, (size_t)(len - kk));
        p += len - kk;
    } else if (kk > -6 && kk <= 0) { /* 1234e-6 -> 0.001234 */
        *p++ = '0';
        *p++ = '.';
        for (int i = kk; i < 0; i++)
            *p++ = '0';
        memcpy(p, d, (size_t)len);
        p += len;
    } else if (len == 1) { /* 1e30 */
        *p++ = d[0];
        p = put_exp(p, kk - 1);
    } else { /* 1234e30 -> 1.234e33 */
        *p++ = d[0];
        *p++ = '.';
        memcpy(p, d + 1, (size_t)(len - 1));
        p += len - 1;
        p = put_exp(p, kk - 1);
    }
    return p;
}

void nr_buf_double(nr_buf_t *b, double v)
{
    char out[NR_DTOA_MAX];
    nr_buf_append(b, out, (size_t)(nr_dtoa(out, v) - out));
}
