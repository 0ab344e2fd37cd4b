// kiln_cpu_math.h: vectorized float32 math for kiln::f32x (included by kiln_cpu.h).
//
// Branch-free polynomial approximations with Cody-Waite range reduction, accurate to a few ulp
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
// and erf's own tail exp, GELU (erf) over 2M floats on one AVX-512 thread: 1.78 -> 1.10 ms (eager,
// oneDNN's kernel: 0.54 ms); erf's largest error against float64 1.29e-7 -> 1.17e-7.
inline f32x multiply_add(f32x a, f32x b, f32x c) {
#ifdef KILN_VECTOR_FMA
  return fused_multiply_add(a, b, c);
#else
  return a * b + c;
#endif
}

// exp of x in [-104, 89] (not NaN), in float32 throughout: within about 1 ulp (exact in ~90% of
// float32 inputs). For erf's inner exp, whose result is rounded again. The range checks are the caller's.
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
  return p * (r * r) + r + 1.0f;
}
inline f32x exp_in_range(f32x clamped) {
  const f32x n = vfloor(clamped * 1.44269504088896341f + 0.5f);
  const f32x p = exp_mantissa(clamped, n);
  // Overflow (x > 88.72) and underflow (x < -103.97) need no test: with x clamped to
  // [-104, 89], 2^n in two steps rounds to inf and to 0 (or a subnormal) exactly as expf does.
  return scale_by_pow2(p, __builtin_convertvector(n, i32x));
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

inline f32x exp(f32x x) {
  // Results below FLT_MIN (x < -87.33) are subnormal or 0. Arithmetic that produces subnormals
  // costs a microcode assist (~100 cycles) per instruction on x86, and a masked softmax feeds exp
  // a huge negative number in every masked lane: lanes that round to 0 are selected, not
  // computed, and only vectors with a truly subnormal result take the exact two-step path.
  const maskx tiny = vlt(x, -87.33f);
  if (any_lane(tiny & (vgt(x, -104.0f)))) {
    const f32x clamped = blend(vlt(x, -104.0f), splat<f32x>(-104.0f), blend(vgt(x, 89.0f), splat<f32x>(89.0f), x));
    const f32x result = exp_in_range_accurate(clamped);
    return blend(vne(x, x), x, result);
  }
  // A NaN lane stays NaN through the polynomial (no test needed); tiny lanes (and -inf) are 0.
  const f32x clamped = blend(tiny, splat<f32x>(0.0f), blend(vgt(x, 89.0f), splat<f32x>(89.0f), x));
#ifdef KILN_VECTOR_FMA
  return blend(tiny, splat<f32x>(0.0f), exp_in_range_fused(clamped));
#else
  return blend(tiny, splat<f32x>(0.0f), exp_in_range_accurate(clamped));
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

inline f32x tanh(f32x x) {
  const f32x ax = blend(vlt(x, 0.0f), -x, x);
  const f32x z = x * x;
  f32x p = splat<f32x>(-5.70498872745e-3f);
  p = multiply_add(p, z, splat<f32x>(2.06390887954e-2f));
  p = multiply_add(p, z, splat<f32x>(-5.37397155531e-2f));
  p = multiply_add(p, z, splat<f32x>(1.33314422036e-1f));
  p = multiply_add(p, z, splat<f32x>(-3.33332819422e-1f));
  const f32x small = p * z * x + x;
  // Where it is used (0.625 <= |x| <= 10), 1 - 2 / (e + 1) takes exp's error down by the factor
  // 2e / (e + 1)^2 < 0.45: exp in float32 (1 ulp) keeps tanh within 7.7e-8 of the exact value, as the
  // correctly rounded double-precision exp did, at ~60% of its cost (2M tanh, AVX2: 6.8 -> 3.9 ms).
  const f32x e = exp_in_range(blend(vgt(ax, 10.0f), splat<f32x>(10.0f), ax) * 2.0f);
  f32x large = 1.0f - 2.0f * reciprocal_finite(e + 1.0f);  // e + 1 in [3.5, 5e8] where it is used
  large = blend(vlt(x, 0.0f), -large, large);
  f32x result = blend(vlt(ax, 0.625f), small, large);
  result = blend(vgt(ax, 10.0f), blend(vlt(x, 0.0f), splat<f32x>(-1.0f), splat<f32x>(1.0f)), result);
  return blend((vne(x, x)) | (veq(x, 0.0f)), x, result);  // NaN stays NaN, -0.0 stays -0.0
}

inline f32x sigmoid(f32x x) {
  const f32x d = 1.0f + exp(-x);  // in [1, inf]: inf (x < -88.7) gives 0, as 1 / inf does
  return blend(veq(d, INFINITY), splat<f32x>(0.0f), reciprocal_finite(d));
}
inline float sigmoid(float x) { return sigmoid(splat<f32x>(x))[0]; }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline f64x sigmoid(f64x x) { return map(x, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }); }

// exp of q in [-18, 0] (erf's tail), as exp_in_range with cheaper steps where the range allows:
// round to nearest by adding 1.5 * 2^23, and 2^n (n in [-26, 0]) in one product.
inline f32x exp_of_erf_tail(f32x q) {
  const f32x n = (q * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  return exp_mantissa(q, n) * float_of((__builtin_convertvector(n, i32x) + 127) << 23);
}

// Two least-squares fits (float32 coefficients), max abs error ~1.2e-7 against erf in double;
// no division and one exp, so it costs about as much as exp plus two short polynomials.
inline f32x erf(f32x x) {
  const i32x sign = bits_of(x) & static_cast<int32_t>(0x80000000u);
  const f32x ax = float_of(bits_of(x) & 0x7fffffff);
  // |x| < 0.921875: erf(x) = x * P(x^2), a least-squares fit of degree 5 in x^2.
  const f32x z = x * x;
  f32x s = splat<f32x>(-6.008739583194256e-4f);
  s = multiply_add(s, z, splat<f32x>(4.997014068067074e-3f));
  s = multiply_add(s, z, splat<f32x>(-2.6769500225782394e-2f));
  s = multiply_add(s, z, splat<f32x>(1.1281905323266983e-1f));
  s = multiply_add(s, z, splat<f32x>(-3.761250376701355e-1f));
  s = multiply_add(s, z, splat<f32x>(1.1283791065216064f));
  const f32x small = s * x;
  // 0.921875 <= |x|: erf(|x|) = 1 - exp(Q(|x|)), Q a degree-7 fit of log(erfc(a)) on
  // [0.921875, 4] weighted by erfc (no division). Beyond 4, erf rounds to 1 in float; clamping
  // the argument keeps Q in its fitted range.
  const f32x a = blend(vgt(ax, 4.0f), splat<f32x>(4.0f), ax);
  f32x q = splat<f32x>(-1.8803539205691777e-5f);
  q = multiply_add(q, a, splat<f32x>(4.0441544842906296e-4f));
  q = multiply_add(q, a, splat<f32x>(-4.007725976407528e-3f));
  q = multiply_add(q, a, splat<f32x>(2.4642042815685272e-2f));
  q = multiply_add(q, a, splat<f32x>(-1.0746941715478897e-1f));
  q = multiply_add(q, a, splat<f32x>(-6.341474652290344e-1f));
  q = multiply_add(q, a, splat<f32x>(-1.1290888786315918f));
  q = multiply_add(q, a, splat<f32x>(8.026063733268529e-5f));
  const f32x large = float_of(bits_of(1.0f - exp_of_erf_tail(q)) | sign);  // Q(a) lies in [-18, 0]
  const f32x result = blend(vlt(ax, 0.921875f), small, large);
  return blend(vne(x, x), x, result);
}

// The scalar float forms: one lane of the vector forms above (see KILN_UNARY_OWN_F32 in kiln_cpu.h).
inline float exp(float x) { return exp(splat<f32x>(x))[0]; }
inline float log(float x) { return log(splat<f32x>(x))[0]; }
inline float sin(float x) { return sin(splat<f32x>(x))[0]; }
inline float cos(float x) { return cos(splat<f32x>(x))[0]; }
inline float tanh(float x) { return tanh(splat<f32x>(x))[0]; }
inline float erf(float x) { return erf(splat<f32x>(x))[0]; }

}  // namespace kiln
