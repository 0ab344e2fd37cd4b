// kiln_cpu_math.h: vectorized float32 math for kiln::f32x (included by kiln_cpu.h).
//
// Branch-free polynomial approximations with Cody-Waite range reduction, or piecewise polynomials
// whose coefficients come from small tables held in registers (erf, erfc), accurate to a few ulp
// over the whole float range (arguments where a reduction would lose accuracy take the C library
// path lane by lane). Every function handles inf and NaN like the C library does.
#pragma once

namespace kiln {

inline i32x bits_of(f32x x) {
  i32x r;
  std::memcpy(&r, &x, sizeof r);
  return r;
}
inline f32x float_of(i32x x) {
  f32x r;
  std::memcpy(&r, &x, sizeof r);
  return r;
}
// One mask test (GCC's builtins: <immintrin.h> would add ~0.5 s to every kernel compile).
inline bool any_lane(maskx m) {
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && KILN_VEC == 16
  return __builtin_ia32_ptestmd512(m, m, static_cast<unsigned short>(0xFFFF)) != 0;
#elif defined(__AVX__) && defined(__GNUC__) && !defined(__clang__)
  typedef long long quad4 __attribute__((vector_size(32)));
  constexpr size_t pieces = sizeof(maskx) / sizeof(quad4);
  quad4 parts[pieces];
  std::memcpy(parts, &m, sizeof parts);
  quad4 all = parts[0];
  for (size_t i = 1; i < pieces; ++i) all |= parts[i];
  return !__builtin_ia32_ptestz256(all, all);
#else
  int32_t acc = 0;
  for (int64_t i = 0; i < VEC; ++i) acc |= m[i];
  return acc != 0;
#endif
}
// floor for |x| < 2^31 by truncating conversions: always vector code (a lane-wise floorf loop is
// vectorized by GCC in some inlining contexts and left as one scalar round per lane in others).
inline f32x vfloor(f32x x) {
  const f32x t = __builtin_convertvector(__builtin_convertvector(x, i32x), f32x);
  return blend(vgt(t, x), t - 1.0f, t);
}
// 2 ** n for integral n in [-252, 254], in two steps so subnormal and large results stay exact.
inline f32x scale_by_pow2(f32x y, i32x n) {
  i32x half_n = n >> 1;
  f32x a = float_of((half_n + 127) << 23);
  f32x b = float_of((n - half_n + 127) << 23);
  return y * a * b;
}

#if defined(__GNUC__) && !defined(__clang__) && \
    ((defined(__AVX512F__) && KILN_VEC == 16) || (defined(__FMA__) && defined(__AVX__) && KILN_VEC == 8))
#define KILN_VECTOR_FMA 1
// a * b + c rounded once (GCC's builtins: -ffp-contract=off keeps every other product rounded).
inline f32x fused_multiply_add(f32x a, f32x b, f32x c) {
#if KILN_VEC == 16
  return __builtin_ia32_vfmaddps512_mask(a, b, c, static_cast<unsigned short>(0xFFFF), 4);
#else
  return __builtin_ia32_vfmaddps256(a, b, c);
#endif
}
#endif

// a * b + c for a polynomial step whose result is rounded again: one fused operation where the
// vector unit has one (fewer roundings, half the instructions), else a product and a sum. With it
// and erf's own tail exp, GELU (erf) over 2M floats on one AVX-512 thread: 1.78 -> 1.10 ms
// (2026-11-29; erf's table form, below, took it further).
inline f32x multiply_add(f32x a, f32x b, f32x c) {
#ifdef KILN_VECTOR_FMA
  return fused_multiply_add(a, b, c);
#else
  return a * b + c;
#endif
}

// exp of x in [-104, 89] (not NaN), in float32 throughout: within about 1 ulp (exact in ~90% of
// float32 inputs). For tanh's exp, whose result is rounded again. The range checks are the caller's.
// exp(x) / 2^n for the integer n nearest x / ln2 (Cody-Waite reduction, a degree-6 polynomial).
inline f32x exp_mantissa(f32x x, f32x n) {
  f32x r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  f32x p = splat<f32x>(1.9875691500e-4f);
  p = multiply_add(p, r, splat<f32x>(1.3981999507e-3f));
  p = multiply_add(p, r, splat<f32x>(8.3334519073e-3f));
  p = multiply_add(p, r, splat<f32x>(4.1665795894e-2f));
  p = multiply_add(p, r, splat<f32x>(1.6666665459e-1f));
  p = multiply_add(p, r, splat<f32x>(5.0000001201e-1f));
  return multiply_add(p, r * r, r) + 1.0f;
}
inline f32x exp_in_range(f32x clamped) {
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && KILN_VEC == 16
  // n by the round-to-nearest of adding and removing 1.5 * 2^23, y * 2^n in one instruction
  // (vscalefps, with IEEE overflow and underflow): a tanh over 2M floats on one thread 17 -> 8 ns per
  // vector with the same results (2026-11-30).
  const f32x n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const f32x p = exp_mantissa(clamped, n);
  return __builtin_ia32_scalefps512_mask(p, n, p, static_cast<unsigned short>(0xFFFF), 4);
#else
  const f32x n = vfloor(clamped * 1.44269504088896341f + 0.5f);
  const f32x p = exp_mantissa(clamped, n);
  // Overflow (x > 88.72) and underflow (x < -103.97) need no test: with x clamped to
  // [-104, 89], 2^n in two steps rounds to inf and to 0 (or a subnormal) exactly as expf does.
  return scale_by_pow2(p, __builtin_convertvector(n, i32x));
#endif
}

// exp of x in [-104, 89] (not NaN), correctly rounded in all but ~3e-5 of float32 inputs (max error
// 0.5 + 2^-10 ulp): the reduction r = x - n ln2 and a degree-7 polynomial run in double (relative
// error 2^-34 on |r| <= ln2 / 2 + 1e-3), 2^n is exact in double, and the one rounding is the final
// conversion to float32 (also to a subnormal, 0 or inf). eager's CPU exp is as accurate (max 0.55
// ulp): the two agree bit for bit on ~99.9% of float32 in [-87, 88] and ~99% of randn * 30, where
// a float32 evaluation agreed on 99.2% and 90%. It costs about twice the float32 form.
inline f32x exp_in_range_accurate(f32x clamped) {
  const f32x nf = vfloor(clamped * 1.44269504088896341f + 0.5f);  // |r| may pass ln2/2 by ~1e-5: fitted
  const f64x n = __builtin_convertvector(nf, f64x);
  const f64x x = __builtin_convertvector(clamped, f64x);
  f64x r = x - n * 0x1.62e42fefa3800p-1;  // ln2's high part: exact products for |n| < 2^11
  r = r - n * 0x1.ef35793c76730p-45;
  f64x q = splat<f64x>(0x1.9fca2156b17f0p-13);
  q = q * r + 0x1.6d985d277f548p-10;
  q = q * r + 0x1.1111e31487ed8p-7;
  q = q * r + 0x1.55547e14b7270p-5;
  q = q * r + 0x1.555554a58636cp-3;
  q = q * r + 0x1.00000044455c3p-1;
  const f64x p = 1.0 + (r + (r * r) * q);
  const i64x biased = (__builtin_convertvector(__builtin_convertvector(nf, i32x), i64x) + 1023) << 52;
  f64x scale;
  std::memcpy(&scale, &biased, sizeof scale);
  return __builtin_convertvector(p * scale, f32x);
}

#ifdef KILN_VECTOR_FMA

// exp of x in [-87.33, 89] (not NaN; normal or infinite results), in float32 with fused
// multiply-adds: correctly rounded in ~99.9% of inputs (max error 0.53 ulp), about twice as fast as
// `exp_in_range_accurate` (2M lanes, AVX-512: 0.51 ms against 1.12). The reduced argument r and its
// rounding error r_lo come from a split ln2 (exact products), 1 + r + r^2 / 2 is summed exactly as a
// pair of floats (r * r's error from a fused multiply-add), the cubic and higher Taylor terms (to r^8:
// truncation below 2^-31 for |r| <= ln2 / 2) go into the pair's low part, and the one rounding that
// matters is the pair's final sum.
inline f32x exp_in_range_fused(f32x clamped) {
  const f32x n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const f32x ln2_high = splat<f32x>(-0.693145751953125f), ln2_low = splat<f32x>(-1.428606765330187045e-06f);
  const f32x r_high = fused_multiply_add(n, ln2_high, clamped);  // exact
  const f32x r = fused_multiply_add(n, ln2_low, r_high);
  const f32x r_low = fused_multiply_add(n, ln2_low, r_high - r);
  const f32x square = r * r;
  const f32x square_low = fused_multiply_add(r, r, -square);
  const f32x half = square * 0.5f;
  f32x p = splat<f32x>(1.0f / 40320.0f);
  p = fused_multiply_add(p, r, splat<f32x>(1.0f / 5040.0f));
  p = fused_multiply_add(p, r, splat<f32x>(1.0f / 720.0f));
  p = fused_multiply_add(p, r, splat<f32x>(1.0f / 120.0f));
  p = fused_multiply_add(p, r, splat<f32x>(1.0f / 24.0f));
  p = fused_multiply_add(p, r, splat<f32x>(1.0f / 6.0f));
  const f32x cubic = (square * r) * p;
  const f32x linear = r + half;  // |half| < |r|: the error of each sum below is exact
  const f32x linear_error = (r - linear) + half;
  const f32x high = 1.0f + linear;
  const f32x high_error = (1.0f - high) + linear;
  const f32x low = ((high_error + linear_error) + (square_low * 0.5f + cubic)) + fused_multiply_add(r_low, r, r_low);
#if KILN_VEC == 16
  // y * 2^n in one instruction (vscalefps), with IEEE overflow to inf.
  return __builtin_ia32_scalefps512_mask(high + low, n, high + low, static_cast<unsigned short>(0xFFFF), 4);
#else
  return scale_by_pow2(high + low, __builtin_convertvector(n, i32x));
#endif
}
#endif

// Whether some lane has low < x < high, and min / max with a constant that keep NaN lanes NaN.
// With AVX-512 the test is two compares into a mask register and one mask test, and min / max are
// one vminps / vmaxps each (they return their second operand where either is NaN), where the
// generic forms build a vector of the mask and blend bitwise.
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && KILN_VEC == 16
inline bool any_between(f32x x, float low, float high) {
  const unsigned short above = __builtin_ia32_cmpps512_mask(x, splat<f32x>(low), 14 /* _CMP_GT_OS */, 0xFFFF, 4);
  return __builtin_ia32_cmpps512_mask(x, splat<f32x>(high), 1 /* _CMP_LT_OS */, above, 4) != 0;
}
inline f32x min_keep_nan(float limit, f32x x) {
  return __builtin_ia32_minps512_mask(splat<f32x>(limit), x, x, static_cast<unsigned short>(0xFFFF), 4);
}
inline f32x max_keep_nan(float limit, f32x x) {
  return __builtin_ia32_maxps512_mask(splat<f32x>(limit), x, x, static_cast<unsigned short>(0xFFFF), 4);
}
#else
inline bool any_between(f32x x, float low, float high) { return any_lane(vgt(x, low) & vlt(x, high)); }
inline f32x min_keep_nan(float limit, f32x x) { return blend(vgt(x, limit), splat<f32x>(limit), x); }
inline f32x max_keep_nan(float limit, f32x x) { return blend(vlt(x, limit), splat<f32x>(limit), x); }
#endif

inline f32x exp(f32x x) {
  // Results below FLT_MIN (x < -87.33) are subnormal or 0. Arithmetic that produces subnormals
  // costs a microcode assist (~100 cycles) per instruction on x86, and a masked softmax feeds exp
  // a huge negative number in every masked lane: lanes that round to 0 are selected, not
  // computed, and only vectors with a truly subnormal result take the exact two-step path.
  if (any_between(x, -104.0f, -87.33f)) {
    const f32x clamped = blend(vlt(x, -104.0f), splat<f32x>(-104.0f), blend(vgt(x, 89.0f), splat<f32x>(89.0f), x));
    const f32x result = exp_in_range_accurate(clamped);
    return blend(vne(x, x), x, result);
  }
  // A NaN lane stays NaN through the polynomial (no test needed); tiny lanes (and -inf) are 0,
  // computed as exp(-87.33) (normal) and then selected away.
  const f32x clamped = max_keep_nan(-87.33f, min_keep_nan(89.0f, x));
#ifdef KILN_VECTOR_FMA
  return blend(vlt(x, -87.33f), splat<f32x>(0.0f), exp_in_range_fused(clamped));
#else
  return blend(vlt(x, -87.33f), splat<f32x>(0.0f), exp_in_range_accurate(clamped));
#endif
}

inline f32x log(f32x x) {
  // Scale subnormals into the normal range first.
  const maskx tiny = vlt(x, 1.17549435e-38f);
  f32x xs = blend(tiny, x * 8388608.0f, x);
  i32x bits = bits_of(xs);
  i32x e = ((bits >> 23) & 0xff) - 126;
  e = blend(tiny, e - 23, e);
  f32x m = float_of((bits & 0x007fffff) | 0x3f000000);  // mantissa in [0.5, 1)
  const maskx small = vlt(m, 0.707106781186547524f);
  f32x ef = __builtin_convertvector(e, f32x);
  ef = blend(small, ef - 1.0f, ef);
  m = blend(small, m + m - 1.0f, m - 1.0f);
  const f32x z = m * m;
  f32x y = splat<f32x>(7.0376836292e-2f);
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + ef * -2.12194440e-4f;
  y = y - 0.5f * z;
  f32x result = m + y + ef * 0.693359375f;
  result = blend(veq(x, INFINITY), x, result);
  result = blend(veq(x, 0.0f), splat<f32x>(-INFINITY), result);
  result = blend((vlt(x, 0.0f)) | (vne(x, x)), splat<f32x>(NAN), result);
  return result;
}

// Sine (cosine when `cosine`) by reduction to [-pi/4, pi/4] in octants.
inline f32x sin_cos(f32x x, bool cosine) {
  const maskx huge = (vgt(x, 8192.0f)) | (vlt(x, -8192.0f));
  if (any_lane(huge)) {
    return cosine ? map(x, [](float v) { return std::cos(v); }) : map(x, [](float v) { return std::sin(v); });
  }
  const f32x ax = blend(vlt(x, 0.0f), -x, x);
  i32x j = __builtin_convertvector(ax * 1.27323954473516f, i32x);
  j = (j + 1) & ~1;  // even octant
  const f32x y = __builtin_convertvector(j, f32x);
  const f32x z = ((ax - y * 0.78515625f) - y * 2.4187564849853515625e-4f) - y * 3.77489497744594108e-8f;
  const f32x zz = z * z;
  f32x c = splat<f32x>(2.443315711809948e-5f);
  c = multiply_add(c, zz, splat<f32x>(-1.388731625493765e-3f));
  c = multiply_add(c, zz, splat<f32x>(4.166664568298827e-2f));
  c = c * zz * zz - 0.5f * zz + 1.0f;
  f32x s = splat<f32x>(-1.9515295891e-4f);
  s = multiply_add(s, zz, splat<f32x>(8.3321608736e-3f));
  s = multiply_add(s, zz, splat<f32x>(-1.6666654611e-1f));
  s = s * zz * z + z;
  i32x q = cosine ? j + 2 : j;
  q = q & 7;
  // Masks from bits by arithmetic (0 - bit): g++ compiles a 16-lane integer `!=` as scalar code on AVX2.
  f32x result = blend(0 - ((q >> 1) & 1), c, s);
  i32x negate = 0 - ((q >> 2) & 1);
  if (!cosine) negate = negate ^ (bits_of(x) >> 31);  // the sign bit, spread: x < 0 (NaN is handled below)
  result = blend(negate, -result, result);
  return blend(vne(x, x), x, blend(veq(ax, INFINITY), splat<f32x>(NAN), result));
}
inline f32x sin(f32x x) { return sin_cos(x, false); }
inline f32x cos(f32x x) { return sin_cos(x, true); }

// 1 / d for finite, nonzero d, within about 1 ulp: a 14-bit estimate and one Newton step cost
// three cheap instructions where a 16-lane division blocks its unit for ~10 cycles.
inline f32x reciprocal_finite(f32x d) {
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && KILN_VEC == 16
  const f32x r = __builtin_ia32_rcp14ps512_mask(d, d, static_cast<unsigned short>(0xFFFF));
  return r + r * (1.0f - d * r);
#else
  return 1.0f / d;
#endif
}

// tanh(|x|) with the sign of x put back at the end (tanh is odd: -0.0 stays -0.0, NaN stays NaN).
inline f32x tanh(f32x x) {
  const i32x sign = bits_of(x) & static_cast<int32_t>(0x80000000u);
  const f32x ax = float_of(bits_of(x) ^ sign);
  const f32x z = ax * ax;
  f32x p = splat<f32x>(-5.70498872745e-3f);
  p = multiply_add(p, z, splat<f32x>(2.06390887954e-2f));
  p = multiply_add(p, z, splat<f32x>(-5.37397155531e-2f));
  p = multiply_add(p, z, splat<f32x>(1.33314422036e-1f));
  p = multiply_add(p, z, splat<f32x>(-3.33332819422e-1f));
  const f32x small = multiply_add(p * z, ax, ax);
  // Where it is used (0.625 <= |x|), 1 - 2 / (e + 1) takes exp's error down by the factor
  // 2e / (e + 1)^2 < 0.45: exp in float32 (1 ulp) keeps tanh within 7.7e-8 of the exact value, as the
  // correctly rounded double-precision exp did, at ~60% of its cost (2M tanh, AVX2: 6.8 -> 3.9 ms).
  // Past |x| = 10 (and for inf) the clamped form rounds to 1 exactly; a NaN passes through.
  const f32x e = exp_in_range(min_keep_nan(10.0f, ax) * 2.0f);
  const f32x large = 1.0f - 2.0f * reciprocal_finite(e + 1.0f);  // e + 1 in [3.5, 5e8] where it is used
  return float_of(bits_of(blend(vlt(ax, 0.625f), small, large)) | sign);
}

// 1 / (1 + exp(-x)): exp's float32 form (1 ulp) is enough, the reciprocal's error dominates; below
// -87.33 exp's result vanishes next to 1, so no subnormal path (2M floats, one AVX-512 thread: 10 -> 7
// ns per vector, 2026-11-30).
inline f32x sigmoid(f32x x) {
  const f32x d = 1.0f + exp_in_range(max_keep_nan(-87.33f, min_keep_nan(89.0f, -x)));  // inf past x < -88.7
  return blend(veq(d, INFINITY), splat<f32x>(0.0f), reciprocal_finite(d));
}
inline float sigmoid(float x) { return sigmoid(splat<f32x>(x))[0]; }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline f64x sigmoid(f64x x) { return map(x, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }); }

// erf's table (tools/fit_erf_table.py): row j holds the t^j coefficients of 8 pieces, twice (a
// 16-lane register holds a row, an 8-lane one its first half). Piece k is erf(a) for |2a - k| <= 1/2
// as a degree-6 polynomial in t = 2a - k (piece 0 without a constant term and fitted for relative
// error, so tiny x keep full precision; piece 7 up to t = 0.84, where it is exactly 1). Largest
// absolute error of the float32 evaluation: 6.7e-8.
alignas(64) inline constexpr float erf_table[7][16] = {
    {  // t^0
        0.0f, 0.5204999f, 0.8427008f, 0.96610516f, 0.9953223f, 0.999593f, 0.9999779f, 0.9999993f,
        0.0f, 0.5204999f, 0.8427008f, 0.96610516f, 0.9953223f, 0.999593f, 0.9999779f, 0.9999993f,
    },
    {  // t^1
        0.5641896f, 0.43939134f, 0.20755395f, 0.059465084f, 0.010333448f, 0.0010891489f, 6.963176e-05f, 2.699624e-06f,
        0.5641896f, 0.43939134f, 0.20755395f, 0.059465084f, 0.010333448f, 0.0010891489f, 6.963176e-05f, 2.699624e-06f,
    },
    {  // t^2
        -2.1430844e-07f, -0.1098476f, -0.103776984f, -0.044598915f, -0.010333456f, -0.0013614212f, -0.00010444295f, -4.7061667e-06f,
        -2.1430844e-07f, -0.1098476f, -0.103776984f, -0.044598915f, -0.010333456f, -0.0013614212f, -0.00010444295f, -4.7061667e-06f,
    },
    {  // t^3
        -0.047010787f, -0.018310139f, 0.017289763f, 0.017345943f, 0.006029315f, 0.0010435418f, 9.847017e-05f, 5.2804094e-06f,
        -0.047010787f, -0.018310139f, 0.017289763f, 0.017345943f, 0.006029315f, 0.0010435418f, 9.847017e-05f, 5.2804094e-06f,
    },
    {  // t^4
        -4.3058375e-05f, 0.011438638f, 0.004325869f, -0.0027864908f, -0.0021534287f, -0.00053900515f, -6.522219e-05f, -4.3948708e-06f,
        -4.3058375e-05f, 0.011438638f, 0.004325869f, -0.0027864908f, -0.0021534287f, -0.00053900515f, -6.522219e-05f, -4.3948708e-06f,
    },
    {  // t^5
        0.0036940703f, 0.0002465971f, -0.002110758f, -0.00048029728f, 0.00039747794f, 0.00019294956f, 3.3105498e-05f, 2.7013114e-06f,
        0.0036940703f, 0.0002465971f, -0.002110758f, -0.00048029728f, 0.00039747794f, 0.00019294956f, 3.3105498e-05f, 2.7013114e-06f,
    },
    {  // t^6
        -0.00030388805f, -0.0007603022f, 6.183028e-05f, 0.00029677068f, 1.0615963e-05f, -4.3138636e-05f, -1.1824695e-05f, -8.678849e-07f,
        -0.00030388805f, -0.0007603022f, 6.183028e-05f, 0.00029677068f, 1.0615963e-05f, -4.3138636e-05f, -1.1824695e-05f, -8.678849e-07f,
    },
};

// row[index % 8] in every lane (row: 8 values, twice): one permute of a register (vpermps) per row
// with AVX2 or AVX-512, no memory access per lane.
inline f32x lookup8(const float* row, i32x index) {
#if defined(__GNUC__) && !defined(__clang__)
  f32x values;
  std::memcpy(&values, row, sizeof values);
  return __builtin_shuffle(values, index);  // lanes of the index count modulo VEC: the row repeats
#else
  f32x r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = row[index[i] & 7];
  return r;
#endif
}

// row[index % 32] in every lane: with AVX-512 one permute of two registers (vpermt2ps) per row;
// with AVX2 four permutes and three selects.
inline f32x lookup32(const float* row, i32x index) {
#if defined(__GNUC__) && !defined(__clang__)
  constexpr int pieces = 32 / VEC;
  f32x part[pieces];
  std::memcpy(part, row, sizeof part);
  if constexpr (pieces == 2) {
    return __builtin_shuffle(part[0], part[1], index);  // lanes of the index count modulo 32
  } else {
    const f32x low = __builtin_shuffle(part[0], part[1], index);
    const f32x high = __builtin_shuffle(part[2], part[3], index);
    return blend((index << 27) >> 31, high, low);  // bit 4 of the index, spread
  }
#else
  f32x r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = row[index[i] & 31];
  return r;
#endif
}

// erf in one formula for every lane: the piece of |x| (rounded 2|x|, read from the bits of a sum
// with 1.5 * 2^23) selects seven coefficients from erf_table, a degree-6 polynomial in the offset,
// the sign of x put back. No exp, no division, no second branch to blend. Every float in [-6, 6]
// against erf in double: max abs error 6.8e-8, relative 1.7e-7 for |x| < 1/2 (the two-branch form
// it replaces, a small-|x| polynomial and 1 - exp(Q(|x|)) computed for every lane: 1.26e-7).
// Measured 2026-11-30 on one thread of a shared 2-core Intel Xeon VM (AVX-512), 2M floats, lower
// quartile of 201 rounds of eager / two-branch erf / this erf called in turn: erf 1.48 -> 0.67 ms
// (eager 1.23), GELU (erf) forward 1.61 -> 0.70 ms (eager 0.79), its backward 3.11 -> 1.84 ms
// (eager 2.14; most of what is left is exp(-x^2 / 2): kiln::exp alone is 1.0 ms, eager's 0.68).
inline f32x erf(f32x x) {
  const i32x sign = bits_of(x) & static_cast<int32_t>(0x80000000u);
  const f32x ax = float_of(bits_of(x) & 0x7fffffff);
  // 2|x| (exact), at most 7.84 (piece 7 at t = 0.84 is exactly 1: every |x| >= 3.92, inf too).
  // A NaN stays NaN: its offset makes the polynomial NaN whatever piece its bits pick.
  const f32x u = min_keep_nan(7.84f, ax * 2.0f);
  const f32x rounded = min_keep_nan(7.0f, u) + 12582912.0f;  // round(u) in the low mantissa bits
  const i32x piece = bits_of(rounded);
  const f32x t = u - (rounded - 12582912.0f);  // exact
  f32x p = lookup8(erf_table[6], piece);
  for (int j = 5; j >= 0; --j) p = multiply_add(p, t, lookup8(erf_table[j], piece));
  return float_of(bits_of(p) | sign);
}

// erfc's table (tools/fit_erf_table.py): erfcx(a) = exp(a^2) * erfc(a), a in [0, 10.25], in 21
// pieces of width 1/2 centred on k / 2, each a degree-6 polynomial in t = 2a - k.
// Largest relative error of the float32 evaluation: 1.06e-07
alignas(64) inline constexpr float erfcx_table[7][32] = {
    {  // t^0
        1.0f, 0.61569035f, 0.42758358f, 0.32158542f, 0.25539568f, 0.21080637f, 0.17900115f, 0.15529366f,
        0.13699946f, 0.1224848f, 0.11070464f, 0.10096222f, 0.09277657f, 0.08580567f, 0.079800054f, 0.074573696f,
        0.069985166f, 0.06592512f, 0.062307723f, 0.05906468f, 0.056140993f, 0.056140993f, 0.056140993f, 0.056140993f,
        0.056140993f, 0.056140993f, 0.056140993f, 0.056140993f, 0.056140993f, 0.056140993f, 0.056140993f, 0.056140993f,
    },
    {  // t^1
        -0.5641895f, -0.2563446f, -0.13660604f, -0.081811465f, -0.053398233f, -0.037173674f, -0.027186131f, -0.02066179f,
        -0.016191753f, -0.013007964f, -0.010666395f, -0.008897383f, -0.0075301765f, -0.006452728f, -0.0055892034f, -0.0048868856f,
        -0.004308254f, -0.0038260424f, -0.0034200673f, -0.0030751391f, -0.002779656f, -0.002779656f, -0.002779656f, -0.002779656f,
        -0.002779656f, -0.002779656f, -0.002779656f, -0.002779656f, -0.002779656f, -0.002779656f, -0.002779656f, -0.002779656f,
    },
    {  // t^2
        0.24999721f, 0.089836426f, 0.038592886f, 0.019037759f, 0.010450688f, 0.006234499f, 0.003971093f, 0.0026652834f,
        0.0018663583f, 0.0013532813f, 0.0010101722f, 0.00077275315f, 0.0006036117f, 0.00048005197f, 0.00038780223f, 0.00031760236f,
        0.00026327578f, 0.00022060086f, 0.00018662857f, 0.0001592584f, 0.00013696763f, 0.00013696763f, 0.00013696763f, 0.00013696763f,
        0.00013696763f, 0.00013696763f, 0.00013696763f, 0.00013696763f, 0.00013696763f, 0.00013696763f, 0.00013696763f, 0.00013696763f,
    },
    {  // t^3
        -0.093998134f, -0.027745314f, -0.009902175f, -0.0041160774f, -0.0019325002f, -0.0010001708f, -0.00055991986f, -0.00033413077f,
        -0.00021014626f, -0.00013807132f, -9.411177e-05f, -6.61828e-05f, -4.7805934e-05f, -3.5342007e-05f, -2.6661975e-05f, -2.0475023e-05f,
        -1.5973546e-05f, -1.2637943e-05f, -1.0125474e-05f, -8.204944e-06f, -6.717222e-06f, -6.717222e-06f, -6.717222e-06f, -6.717222e-06f,
        -6.717222e-06f, -6.717222e-06f, -6.717222e-06f, -6.717222e-06f, -6.717222e-06f, -6.717222e-06f, -6.717222e-06f, -6.717222e-06f,
    },
    {  // t^4
        0.0310561f, 0.0077604097f, 0.0023481757f, 0.0008360568f, 0.00034003815f, 0.00015418726f, 7.6439064e-05f, 4.0792565e-05f,
        2.3146897e-05f, 1.3829096e-05f, 8.631375e-06f, 5.5925375e-06f, 3.7424218e-06f, 2.575644e-06f, 1.8167674e-06f, 1.3095901e-06f,
        9.623586e-07f, 7.1946397e-07f, 5.46246e-07f, 4.205513e-07f, 3.2789492e-07f, 3.2789492e-07f, 3.2789492e-07f, 3.2789492e-07f,
        3.2789492e-07f, 3.2789492e-07f, 3.2789492e-07f, 3.2789492e-07f, 3.2789492e-07f, 3.2789492e-07f, 3.2789492e-07f, 3.2789492e-07f,
    },
    {  // t^5
        -0.008814711f, -0.002047084f, -0.00053024024f, -0.00016309183f, -5.7875248e-05f, -2.3127026e-05f, -1.0200989e-05f, -4.8866673e-06f,
        -2.5091892e-06f, -1.3664659e-06f, -7.824833e-07f, -4.6786337e-07f, -2.9042516e-07f, -1.8627652e-07f, -1.2296279e-07f, -8.3260986e-08f,
        -5.7669414e-08f, -4.076166e-08f, -2.9340995e-08f, -2.147101e-08f, -1.5948608e-08f, -1.5948608e-08f, -1.5948608e-08f, -1.5948608e-08f,
        -1.5948608e-08f, -1.5948608e-08f, -1.5948608e-08f, -1.5948608e-08f, -1.5948608e-08f, -1.5948608e-08f, -1.5948608e-08f, -1.5948608e-08f,
    },
    {  // t^6
        0.0016775993f, 0.00048759888f, 0.00011036177f, 2.9799052e-05f, 9.342517e-06f, 3.3222343e-06f, 1.3137609e-06f, 5.6831567e-07f,
        2.6532248e-07f, 1.3220338e-07f, 6.966706e-08f, 3.8535212e-08f, 2.2234193e-08f, 1.33126115e-08f, 8.235414e-09f, 5.2444107e-09f,
        3.4271972e-09f, 2.2921682e-09f, 1.5653543e-09f, 1.0894802e-09f, 7.714259e-10f, 7.714259e-10f, 7.714259e-10f, 7.714259e-10f,
        7.714259e-10f, 7.714259e-10f, 7.714259e-10f, 7.714259e-10f, 7.714259e-10f, 7.714259e-10f, 7.714259e-10f, 7.714259e-10f,
    },
};

// e^r for |r| <= ln2 / 2 (a little more is fine): exp_mantissa's polynomial.
inline f32x exp_reduced(f32x r) {
  f32x p = splat<f32x>(1.9875691500e-4f);
  p = multiply_add(p, r, splat<f32x>(1.3981999507e-3f));
  p = multiply_add(p, r, splat<f32x>(8.3334519073e-3f));
  p = multiply_add(p, r, splat<f32x>(4.1665795894e-2f));
  p = multiply_add(p, r, splat<f32x>(1.6666665459e-1f));
  p = multiply_add(p, r, splat<f32x>(5.0000001201e-1f));
  return multiply_add(p, r * r, r) + 1.0f;
}

// y * 2^n for integral n in [-252, 254] (n as a float), rounded once: one vscalefps on AVX-512.
inline f32x scale_by_pow2(f32x y, f32x n) {
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && KILN_VEC == 16
  return __builtin_ia32_scalefps512_mask(y, n, y, static_cast<unsigned short>(0xFFFF), 4);
#else
  return scale_by_pow2(y, __builtin_convertvector(n, i32x));
#endif
}

// erfc(x) = exp(-x^2) * erfcx(|x|) for x >= 0 and 2 minus that for x < 0, one formula for every
// lane (the C library's erfc lane by lane before). exp sees all of x^2: its rounding error (from a
// fused multiply-add, else from squaring the 12 high bits of |x| exactly) is folded into the reduced
// argument, and 2^n scales the product last, so results down to the smallest subnormal (|x| near
// 10.05) round once. Every float in [-6, 10.1] against erfc in double: within 2.8 ulp where the
// result is normal (relative 2.1e-7), 1.6 units of the smallest subnormal where it is not. 2M
// floats, one thread (as erf above): 46.7 -> 2.2 ms (eager 2.3).
inline f32x erfc(f32x x) {
  const f32x ax = min_keep_nan(10.25f, float_of(bits_of(x) & 0x7fffffff));  // erfc(10.25) rounds to 0
  const f32x u = ax * 2.0f;
  const f32x rounded = u + 12582912.0f;  // round(u) in the low mantissa bits
  const i32x piece = bits_of(rounded);
  const f32x t = u - (rounded - 12582912.0f);
  f32x scaled = lookup32(erfcx_table[6], piece);
  for (int j = 5; j >= 0; --j) scaled = multiply_add(scaled, t, lookup32(erfcx_table[j], piece));
#ifdef KILN_VECTOR_FMA
  const f32x square = ax * ax;
  const f32x square_low = fused_multiply_add(ax, ax, -square);  // ax^2 - square, exactly
#else
  const f32x high = float_of(bits_of(ax) & static_cast<int32_t>(0xfffff000u));
  const f32x square = high * high;  // exact
  const f32x square_low = (ax - high) * (ax + high);  // ax^2 - square
#endif
  const f32x n = (square * -1.44269504088896341f + 12582912.0f) - 12582912.0f;
  f32x r = multiply_add(n, splat<f32x>(-0.693359375f), -square);  // exact: n * ln2's high part has 17 bits
  r = multiply_add(n, splat<f32x>(2.12194440e-4f), r - square_low);
  const f32x y = scale_by_pow2(exp_reduced(r) * scaled, n);
  return blend(vlt(x, 0.0f), 2.0f - y, y);
}

// The scalar float forms: one lane of the vector forms above (see KILN_UNARY_OWN_F32 in kiln_cpu.h).
inline float exp(float x) { return exp(splat<f32x>(x))[0]; }
inline float log(float x) { return log(splat<f32x>(x))[0]; }
inline float sin(float x) { return sin(splat<f32x>(x))[0]; }
inline float cos(float x) { return cos(splat<f32x>(x))[0]; }
inline float tanh(float x) { return tanh(splat<f32x>(x))[0]; }
inline float erf(float x) { return erf(splat<f32x>(x))[0]; }
inline float erfc(float x) { return erfc(splat<f32x>(x))[0]; }

}  // namespace kiln
