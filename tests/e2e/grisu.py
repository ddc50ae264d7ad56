"""Reference for how Triton writes doubles in JSON: RapidJSON's Writer (Grisu2 + Prettify, with
NaN/Infinity written as bare tokens). Triton widens FP32 outputs to double and writes them with
this, so e.g. float32(0.3) is written 0.30000001192092898: Grisu2 output (it reads back to the
same double), not the closest 17-digit string 0.30000001192092896 that repr/Ryu/printf give.

Grisu2 as published (Loitsch, "Printing floating-point numbers quickly and accurately with
integers", PLDI 2010), with exact Python integers standing in for 64/128-bit arithmetic, and the
output layout RapidJSON's Writer uses (decimal notation for exponents -6 < k <= 21, else
d.ddde<exp> with no '+' and no leading zeros; "-0.0"; bare NaN/Infinity). Checked against every
FP32 number in the recorded Triton answers (test_infer_json.py::test_grisu_reference_...).
"""

import math
import struct

_MASK64 = (1 << 64) - 1
_DP_SIGNIFICAND_SIZE = 52
_DP_EXPONENT_BIAS = 0x3FF + _DP_SIGNIFICAND_SIZE
_DP_MIN_EXPONENT = -_DP_EXPONENT_BIAS
_DP_HIDDEN_BIT = 1 << 52
_DP_SIGNIFICAND_MASK = _DP_HIDDEN_BIT - 1


def _cached_power_table():
    """10^k for k = -348, -340, ..., 340 as (64-bit normalized significand rounded to nearest,
    binary exponent), the cached powers of the Grisu paper, computed exactly."""
    from fractions import Fraction
    out_f, out_e = [], []
    for k in range(-348, 341, 8):
        v = Fraction(10) ** k
        e = v.numerator.bit_length() - v.denominator.bit_length() - 64
        while v / Fraction(2) ** e >= 2 ** 64:
            e += 1
        while v / Fraction(2) ** e < 2 ** 63:
            e -= 1
        q, r = divmod((v / Fraction(2) ** e).numerator, (v / Fraction(2) ** e).denominator)
        if 2 * r >= (v / Fraction(2) ** e).denominator:
            q += 1
        if q == 2 ** 64:
            q, e = q // 2, e + 1
        out_f.append(q)
        out_e.append(e)
    return out_f, out_e


_CACHED_F, _CACHED_E = _cached_power_table()
_POW10 = [10 ** i for i in range(10)]


def _mul(af, ae, bf, be):
    p = af * bf
    h, lo = p >> 64, p & _MASK64
    if lo & (1 << 63):
        h += 1
    return h & _MASK64, ae + be + 64


def _normalize(f, e):
    s = 64 - f.bit_length()
    return (f << s) & _MASK64, e - s


def _normalize_boundary(f, e):
    while not (f & (_DP_HIDDEN_BIT << 1)):
        f <<= 1
        e -= 1
    sh = 64 - _DP_SIGNIFICAND_SIZE - 2
    return (f << sh) & _MASK64, e - sh


def _cached_power(e):
    k = (347 + 8 - (((61 + e) * 78913) >> 18)) & 0xFFFFFFFF
    index = k // 8
    K = 348 - (k & ~7)
    return _CACHED_F[index], _CACHED_E[index], K


def _grisu_round(buf, delta, rest, ten_kappa, wp_w):
    while (rest < wp_w and delta - rest >= ten_kappa
           and (rest + ten_kappa < wp_w or wp_w - rest > rest + ten_kappa - wp_w)):
        buf[-1] -= 1
        rest += ten_kappa


def _digit_gen(Wf, We, Mpf, Mpe, delta, K):
    one_e = Mpe
    one_f = 1 << -one_e
    wp_w = (Mpf - Wf) & _MASK64
    p1 = Mpf >> -one_e
    p2 = Mpf & (one_f - 1)
    kappa = len(str(p1)) if p1 >= 10 else 1
    kappa = min(kappa, 9)
    buf = []
    while kappa > 0:
        div = _POW10[kappa - 1]
        d, p1 = divmod(p1, div)
        if d or buf:
            buf.append(d)
        kappa -= 1
        tmp = (p1 << -one_e) + p2
        if tmp <= delta:
            K += kappa
            _grisu_round(buf, delta, tmp, _POW10[kappa] << -one_e, wp_w)
            return buf, K
    while True:
        p2 = (p2 * 10) & _MASK64
        delta = (delta * 10) & _MASK64
        d = p2 >> -one_e
        if d or buf:
            buf.append(d)
        p2 &= one_f - 1
        kappa -= 1
        if p2 < delta:
            K += kappa
            index = -kappa
            # RapidJSON as vendored by Triton: `wp_w.f * (index < 9 ? kPow10[index] : 0)`
            # (newer RapidJSON uses a 20-entry table here and rounds the last digit further:
            # 0.30000001192092896 instead of Triton's 0.30000001192092898)
            _grisu_round(buf, delta, p2, one_f,
                         (wp_w * (_POW10[index] if index < 9 else 0)) & _MASK64)
            return buf, K


def _grisu2(value):
    u = struct.unpack("<Q", struct.pack("<d", value))[0]
    biased_e = (u >> 52) & 0x7FF
    sig = u & _DP_SIGNIFICAND_MASK
    if biased_e:
        f, e = sig + _DP_HIDDEN_BIT, biased_e - _DP_EXPONENT_BIAS
    else:
        f, e = sig, _DP_MIN_EXPONENT + 1
    plf, ple = _normalize_boundary((f << 1) + 1, e - 1)
    if f == _DP_HIDDEN_BIT:
        mif, mie = (f << 2) - 1, e - 2
    else:
        mif, mie = (f << 1) - 1, e - 1
    mif <<= mie - ple
    cf, ce, K = _cached_power(ple)
    Wf, We = _mul(*_normalize(f, e), cf, ce)
    Wpf, Wpe = _mul(plf, ple, cf, ce)
    Wmf, _ = _mul(mif & _MASK64, ple, cf, ce)
    Wmf += 1
    Wpf -= 1
    buf, K = _digit_gen(Wf, We, Wpf, Wpe, Wpf - Wmf, K)
    return "".join(map(str, buf)), K


def _exponent(k):
    return ("-" if k < 0 else "") + str(abs(k))


def _prettify(digits, k):
    length = len(digits)
    kk = length + k
    if 0 <= k and kk <= 21:
        return digits + "0" * (kk - length) + ".0"
    if 0 < kk <= 21:
        return digits[:kk] + "." + digits[kk:]
    if -6 < kk <= 0:
        return "0." + "0" * (-kk) + digits
    if length == 1:
        return digits + "e" + _exponent(kk - 1)
    return digits[0] + "." + digits[1:] + "e" + _exponent(kk - 1)


def dumps_double(value):
    """The text RapidJSON's Writer produces for `value` (with kWriteNanAndInfFlag)."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = ""
    if value < 0:
        sign, value = "-", -value
    digits, k = _grisu2(value)
    return sign + _prettify(digits, k)
