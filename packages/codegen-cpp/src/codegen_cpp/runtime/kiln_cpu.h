// kiln_cpu.h: the runtime every Kiln C++ kernel library includes.
//
// Vectors are GCC/Clang vector extensions of a fixed lane count (kiln::VEC); the compiler lowers
// them to AVX-512, AVX2, SSE or NEON, whichever -march allows, so one source serves every CPU.
// Every dtype is computed in a "compute type": float32/float16/bfloat16 in float, float64 in
// double, int64 in int64_t, the other integers in int32_t, bool as a 0/-1 int32 lane mask.
// Scalar overloads (used by scalar tails and non-vectorized kernels) call the C library.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <limits>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace kiln {

// Lanes per vector: 16 where AVX-512 holds 16 floats in one register, 8 on AVX2 (the code generator
// passes -DKILN_VEC; see codegen/lanes.py).
#ifndef KILN_VEC
#define KILN_VEC 16
#endif
constexpr int64_t VEC = KILN_VEC;
static_assert(VEC == 8 || VEC == 16, "kiln vectors have 8 or 16 lanes");

typedef float f32x __attribute__((vector_size(VEC * 4)));
typedef double f64x __attribute__((vector_size(VEC * 8)));
typedef int32_t i32x __attribute__((vector_size(VEC * 4)));
typedef int64_t i64x __attribute__((vector_size(VEC * 8)));
typedef uint32_t u32x __attribute__((vector_size(VEC * 4)));
typedef uint16_t u16x __attribute__((vector_size(VEC * 2)));
typedef uint8_t u8x __attribute__((vector_size(VEC)));
typedef int8_t s8x __attribute__((vector_size(VEC)));
typedef int16_t s16x __attribute__((vector_size(VEC * 2)));
typedef i32x maskx;  // bool vectors: 0 or -1 per lane

// Storage-only 16-bit float types: loaded into float, computed in float, rounded on store.
struct half { uint16_t bits; };
struct bfloat16 { uint16_t bits; };

template <class V> struct elem;
template <> struct elem<f32x> { typedef float type; };
template <> struct elem<f64x> { typedef double type; };
template <> struct elem<i32x> { typedef int32_t type; };
template <> struct elem<i64x> { typedef int64_t type; };

template <class V>
inline V splat(typename elem<V>::type s) {
  // `s - 0` in every lane: exactly s for every s (-0.0 - 0.0 is -0.0, where `V{} + s` lost the sign
  // of a negative zero: x / -0.0 became +inf), and one broadcast (vbroadcastss) that g++ can hoist.
  // A loop setting each lane compiled, for a scalar loaded from memory, into one masked broadcast
  // per lane inside the vector loop (an RMSNorm backward's row factor: 16 per vector).
  return s - V{};
}
template <class V>
inline V iota(typename elem<V>::type base) {
  V v;
  for (int64_t i = 0; i < VEC; ++i) v[i] = base + static_cast<typename elem<V>::type>(i);
  return v;
}
inline maskx splat_mask(bool b) { return splat<i32x>(b ? -1 : 0); }
// `m ? a : b` lane by lane (m's lanes all ones or all zeros, as comparisons give), as bitwise
// operations: g++ splits those into the machine's vector width, where it compiles a vector `?:`
// wider than the machine's registers (16 lanes on AVX2) into one scalar select per lane.
template <class M, class V>
inline V blend(M m, V a, V b) {
  static_assert(sizeof(M) == sizeof(V), "a mask has the lane width of the values it selects");
  return (V)((m & (M)a) | (~m & (M)b));
}
// Lane-wise comparisons, in pieces of the machine's vector width: g++ compiles a comparison of
// vectors wider than that (16 float lanes on AVX2) as one scalar comparison per lane.
#if defined(__AVX512F__)
constexpr size_t NATIVE_VECTOR_BYTES = 64;
#else
constexpr size_t NATIVE_VECTOR_BYTES = 32;
#endif
template <class V, class Op>
inline auto compare(V a, V b, Op op) -> decltype(a < b) {
  typedef decltype(a < b) M;
  if constexpr (sizeof(V) <= NATIVE_VECTOR_BYTES) {
    return op(a, b);
  } else {
    typedef std::remove_reference_t<decltype(a[0])> E;
    typedef E H __attribute__((vector_size(sizeof(V) / 2)));
    H a0, a1, b0, b1;
    std::memcpy(&a0, &a, sizeof(H));
    std::memcpy(&a1, reinterpret_cast<const char*>(&a) + sizeof(H), sizeof(H));
    std::memcpy(&b0, &b, sizeof(H));
    std::memcpy(&b1, reinterpret_cast<const char*>(&b) + sizeof(H), sizeof(H));
    const auto r0 = compare(a0, b0, op), r1 = compare(a1, b1, op);
    M r;
    std::memcpy(&r, &r0, sizeof(r0));
    std::memcpy(reinterpret_cast<char*>(&r) + sizeof(r0), &r1, sizeof(r1));
    return r;
  }
}
#define KILN_VCMP(name, op)                                                                   \
  template <class V>                                                                          \
  inline auto name(V a, V b) { return compare(a, b, [](auto x, auto y) { return x op y; }); } \
  template <class V>                                                                          \
  inline auto name(V a, std::remove_reference_t<decltype(a[0])> b) { return name(a, splat<V>(b)); }
KILN_VCMP(vlt, <)
KILN_VCMP(vle, <=)
KILN_VCMP(vgt, >)
KILN_VCMP(vge, >=)
KILN_VCMP(veq, ==)
KILN_VCMP(vne, !=)
#undef KILN_VCMP
template <class V, class F>
inline V map(V x, F f) {
  V r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = f(x[i]);
  return r;
}
template <class V, class F>
inline V map2(V x, V y, F f) {
  V r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = f(x[i], y[i]);
  return r;
}


// ---------------------------------------------------------------- 16-bit float conversions
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t bits = em << 13;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= 0x1.0p112f;  // rebias the exponent; also right for subnormals
  std::memcpy(&bits, &f, 4);
  if (em >= 0x7c00u) bits = (em << 13) | 0x7f800000u;
  bits |= sign;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t f32_to_f16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  uint32_t out;
  if (x >= 0x7f800000u) {
    out = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (x >= 0x47800000u) {
    out = 0x7c00u;
  } else if (x < 0x38800000u) {  // result is subnormal: let the FPU round at the right place
    float f;
    std::memcpy(&f, &x, 4);
    f += 0.5f;
    uint32_t b;
    std::memcpy(&b, &f, 4);
    out = b - 0x3f000000u;
  } else {
    uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000fffu + odd;  // ((15 - 127) << 23) + rounding bias, round half to even
    out = x >> 13;
  }
  return static_cast<uint16_t>(out | sign);
}
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t f32_to_bf16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
inline float to_float(half h) { return f16_to_f32(h.bits); }
inline float to_float(bfloat16 h) { return bf16_to_f32(h.bits); }
inline half to_half(float f) { return half{f32_to_f16(f)}; }
inline bfloat16 to_bfloat16(float f) { return bfloat16{f32_to_bf16(f)}; }

// ---------------------------------------------------------------- vector loads and stores
template <class V, class T>
inline V load_raw(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
inline f32x load(const float* p) { return load_raw<f32x>(p); }
inline f64x load(const double* p) { return load_raw<f64x>(p); }
inline i64x load(const int64_t* p) { return load_raw<i64x>(p); }
inline i32x load(const int32_t* p) { return load_raw<i32x>(p); }
inline i32x load(const int16_t* p) { return __builtin_convertvector(load_raw<s16x>(p), i32x); }
inline i32x load(const int8_t* p) { return __builtin_convertvector(load_raw<s8x>(p), i32x); }
inline i32x load(const uint8_t* p) { return __builtin_convertvector(load_raw<u8x>(p), i32x); }
inline maskx load(const bool* p) { return __builtin_convertvector(load_raw<u8x>(p) != 0, i32x); }
// f16_to_f32 and f32_to_f16 on every lane, in vector instructions (each branch computed, then selected).
inline f32x f16_to_f32_lanes(u32x h) {
  u32x sign = (h & 0x8000u) << 16;
  u32x em = h & 0x7fffu;
  u32x bits = em << 13;
  f32x f;
  std::memcpy(&f, &bits, sizeof f);
  f *= 0x1.0p112f;  // rebias the exponent; also right for subnormals
  std::memcpy(&bits, &f, sizeof f);
  bits = (em >= 0x7c00u ? (em << 13) | 0x7f800000u : bits) | sign;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline u32x f32_to_f16_lanes(f32x v) {
  u32x x;
  std::memcpy(&x, &v, sizeof x);
  u32x sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  f32x magnitude;
  std::memcpy(&magnitude, &x, sizeof x);
  magnitude += 0.5f;  // a subnormal result: the FPU rounds at the right place
  u32x subnormal;
  std::memcpy(&subnormal, &magnitude, sizeof x);
  subnormal -= 0x3f000000u;
  u32x normal = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;  // round half to even
  u32x special = x > 0x7f800000u ? u32x{} + 0x7e00u : u32x{} + 0x7c00u;
  u32x out = x >= 0x47800000u ? special : x < 0x38800000u ? subnormal : normal;
  return out | sign;
}
inline f32x load(const half* p) { return f16_to_f32_lanes(__builtin_convertvector(load_raw<u16x>(p), u32x)); }
inline f32x load(const bfloat16* p) {
  u32x bits = __builtin_convertvector(load_raw<u16x>(p), u32x) << 16;
  f32x r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

template <class T, class V>
inline void store_raw(T* p, V v) { std::memcpy(p, &v, sizeof(V)); }
inline void store(float* p, f32x v) { store_raw(p, v); }
inline void store(double* p, f64x v) { store_raw(p, v); }
inline void store(int64_t* p, i64x v) { store_raw(p, v); }
inline void store(int32_t* p, i32x v) { store_raw(p, v); }
inline void store(int16_t* p, i32x v) { store_raw(p, __builtin_convertvector(v, s16x)); }
inline void store(int8_t* p, i32x v) { store_raw(p, __builtin_convertvector(v, s8x)); }
inline void store(uint8_t* p, i32x v) { store_raw(p, __builtin_convertvector(v, u8x)); }
inline void store_mask(bool* p, maskx m) { store_raw(p, __builtin_convertvector(m != 0, u8x) & 1); }
inline void store(half* p, f32x v) { store_raw(p, __builtin_convertvector(f32_to_f16_lanes(v), u16x)); }
// f32_to_bf16 on every lane, in vector instructions: round to nearest even on the top 16 bits, a NaN
// quieted (0x40) with its sign and payload's top bits kept.
inline u32x f32_to_bf16_lanes(f32x v) {
  u32x x;
  std::memcpy(&x, &v, sizeof x);
  u32x rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  u32x quiet = (x >> 16) | 0x40u;
  return (x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
}
inline void store(bfloat16* p, f32x v) { store_raw(p, __builtin_convertvector(f32_to_bf16_lanes(v), u16x)); }

// Scalar element access in compute types.
inline float load1(const float* p) { return *p; }
inline double load1(const double* p) { return *p; }
inline int64_t load1(const int64_t* p) { return *p; }
inline int32_t load1(const int32_t* p) { return *p; }
inline int32_t load1(const int16_t* p) { return *p; }
inline int32_t load1(const int8_t* p) { return *p; }
inline int32_t load1(const uint8_t* p) { return *p; }
inline bool load1(const bool* p) { return *p; }
inline float load1(const half* p) { return f16_to_f32(p->bits); }
inline float load1(const bfloat16* p) { return bf16_to_f32(p->bits); }
template <class T, class S>
inline void store1(T* p, S v) { *p = static_cast<T>(v); }
inline void store1(half* p, float v) { p->bits = f32_to_f16(v); }
inline void store1(bfloat16* p, float v) { p->bits = f32_to_bf16(v); }

template <class T> struct vec_of;
template <> struct vec_of<float> { typedef f32x type; };
template <> struct vec_of<double> { typedef f64x type; };
template <> struct vec_of<int64_t> { typedef i64x type; };
template <> struct vec_of<int32_t> { typedef i32x type; };
template <> struct vec_of<bool> { typedef maskx type; };

// Gather: lane i reads p[index(i)], for strided, broadcast-in-part or indirect loads.
template <class T, class F>
inline auto gather(const T* p, F index) {
  typedef decltype(load1(p)) S;
  typename vec_of<S>::type r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = load1(p + index(i));
  if constexpr (sizeof(S) == 1) return -r;  // bool lanes become 0/-1 masks
  else return r;
}
// Gather under a mask: lanes whose mask is clear read nothing (their index may be out of bounds).
template <class T, class F>
inline auto gather_masked(const T* p, F index, maskx mask) {
  typedef decltype(load1(p)) S;
  typename vec_of<S>::type r = {};
  for (int64_t i = 0; i < VEC; ++i) {
    if (mask[i]) r[i] = load1(p + index(i));
  }
  if constexpr (sizeof(S) == 1) return -r;
  else return r;
}
template <class T, class V, class F>
inline void scatter(T* p, V v, F index) {
  for (int64_t i = 0; i < VEC; ++i) store1(p + index(i), v[i]);
}
template <class T, class F>
inline void scatter_mask(T* p, maskx v, F index) {
  for (int64_t i = 0; i < VEC; ++i) store1(p + index(i), v[i] != 0);
}
// Lane-wise evaluation of an index expression: lane i is index(i).
template <class V, class F>
inline V lanes(F index) {
  V r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = index(i);
  return r;
}

// ---------------------------------------------------------------- conversions
template <class To, class From>
inline To convert(From v) { return __builtin_convertvector(v, To); }
template <class To>
inline To mask_to(maskx m) { return __builtin_convertvector(m & 1, To); }
// A value g++ may not reason about (an empty asm that "changes" it): under -fno-trapping-math g++
// rewrites (float)(int)x as trunc(x), which keeps a zero's sign (7 / int(-0.3) gave -inf, eager inf),
// so every float-to-integer conversion's result passes through here.
template <class T>
inline T opaque(T v) {
#if defined(__GNUC__)
  // A vector may span several registers (16 lanes without AVX-512): it goes through memory.
  if constexpr (std::is_integral_v<T>) __asm__("" : "+r"(v)); else __asm__("" : "+m"(v));
#endif
  return v;
}
// A float vector to an integer vector (lanes convert as cvttps2dq does).
template <class To, class From>
inline To float_to_int_lanes(From v) { return opaque(__builtin_convertvector(v, To)); }
// A float to an integer as x86 converts it (cvttss2si / cvttsd2si, what eager's kernels compile
// to): NaN and values outside the integer's range give its minimum. A plain static_cast is
// undefined there, and g++ folds a constant NaN to 0. Narrow integers convert through int32_t
// and wrap, as eager's static_cast<int8_t>(float) does on x86.
template <class I, class F>
inline I float_to_int(F v) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr F limit = -static_cast<F>(std::numeric_limits<I>::min());  // 2^31 or 2^63, exact
  if (!(v >= -limit && v < limit)) return std::numeric_limits<I>::min();
#endif
  return opaque(static_cast<I>(v));
}
template <class V>
inline i64x float_to_int64(V v) {
  i64x r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = float_to_int<int64_t>(v[i]);
  return r;
}
template <class V>
inline maskx to_mask(V v) { return __builtin_convertvector(v != 0, maskx); }
// Rounding to a narrower dtype's precision or range, staying in the compute type.
inline float round_half(float v) { return f16_to_f32(f32_to_f16(v)); }
inline float round_bfloat16(float v) { return bf16_to_f32(f32_to_bf16(v)); }
inline f32x round_half(f32x v) { return f16_to_f32_lanes(f32_to_f16_lanes(v)); }
inline f32x round_bfloat16(f32x v) {
  u32x bits = f32_to_bf16_lanes(v) << 16;
  f32x r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}
inline i32x wrap_int8(i32x v) { return __builtin_convertvector(__builtin_convertvector(v, s8x), i32x); }
inline i32x wrap_uint8(i32x v) { return __builtin_convertvector(__builtin_convertvector(v, u8x), i32x); }
inline i32x wrap_int16(i32x v) { return __builtin_convertvector(__builtin_convertvector(v, s16x), i32x); }
inline maskx to_mask(f64x v) { return __builtin_convertvector(v != 0, maskx); }
inline maskx to_mask(i64x v) { return __builtin_convertvector(v != 0, maskx); }

// Comparisons always yield a maskx, whatever the operand width.
#define KILN_CMP(name, op)                                                                    \
  inline maskx name(f32x a, f32x b) { return v##name(a, b); }                                 \
  inline maskx name(i32x a, i32x b) { return v##name(a, b); }                                 \
  inline maskx name(f64x a, f64x b) { return __builtin_convertvector(v##name(a, b), maskx); } \
  inline maskx name(i64x a, i64x b) { return __builtin_convertvector(v##name(a, b), maskx); } \
  template <class S>                                                                    \
  inline bool name(S a, S b) { return a op b; }
KILN_CMP(eq, ==)
KILN_CMP(ne, !=)
KILN_CMP(lt, <)
KILN_CMP(le, <=)
KILN_CMP(gt, >)
KILN_CMP(ge, >=)
#undef KILN_CMP

inline f32x where(maskx m, f32x a, f32x b) { return blend(m, a, b); }
inline i32x where(maskx m, i32x a, i32x b) { return blend(m, a, b); }
inline f64x where(maskx m, f64x a, f64x b) { return blend(__builtin_convertvector(m, i64x), a, b); }
inline i64x where(maskx m, i64x a, i64x b) { return blend(__builtin_convertvector(m, i64x), a, b); }
template <class S>
inline S where(bool m, S a, S b) { return m ? a : b; }
inline maskx where_mask(maskx m, maskx a, maskx b) { return blend(m, a, b); }

// ---------------------------------------------------------------- lane-wise fallbacks
#define KILN_UNARY_STD(name, fn)                                         \
  inline float name(float x) { return fn(x); }                          \
  inline double name(double x) { return fn(x); }                        \
  inline f64x name(f64x x) { return map(x, [](double v) { return fn(v); }); }
#define KILN_UNARY_LANES(name, fn)                                       \
  KILN_UNARY_STD(name, fn)                                               \
  inline f32x name(f32x x) { return map(x, [](float v) { return fn(v); }); }

KILN_UNARY_LANES(sqrt, std::sqrt)
KILN_UNARY_LANES(floor, std::floor)
KILN_UNARY_LANES(ceil, std::ceil)
KILN_UNARY_LANES(trunc, std::trunc)
KILN_UNARY_LANES(round, std::nearbyint)
KILN_UNARY_LANES(fabs, std::fabs)
KILN_UNARY_LANES(tan, std::tan)
KILN_UNARY_LANES(asin, std::asin)
KILN_UNARY_LANES(acos, std::acos)
KILN_UNARY_LANES(atan, std::atan)
KILN_UNARY_LANES(sinh, std::sinh)
KILN_UNARY_LANES(cosh, std::cosh)
KILN_UNARY_LANES(asinh, std::asinh)
KILN_UNARY_LANES(acosh, std::acosh)
KILN_UNARY_LANES(atanh, std::atanh)
KILN_UNARY_LANES(expm1, std::expm1)
KILN_UNARY_LANES(log1p, std::log1p)
KILN_UNARY_LANES(log2, std::log2)
KILN_UNARY_LANES(log10, std::log10)
KILN_UNARY_LANES(exp2, std::exp2)
KILN_UNARY_LANES(lgamma, std::lgamma)
// Functions whose float32 vector form is Kiln's own (kiln_cpu_math.h): the scalar float form is
// defined there too, as one lane of the vector form, so that a value computed in a scalar loop (a
// tail, a reduction) has the same bits as in a vector loop: a max's backward compares a recomputed
// value with the saved maximum (sigmoid(x).amax() lost its gradient where the two differed).
#define KILN_UNARY_OWN_F32(name, fn)                                     \
  inline float name(float x);                                            \
  inline double name(double x) { return fn(x); }                        \
  inline f64x name(f64x x) { return map(x, [](double v) { return fn(v); }); }
KILN_UNARY_OWN_F32(exp, std::exp)
KILN_UNARY_OWN_F32(log, std::log)
KILN_UNARY_OWN_F32(sin, std::sin)
KILN_UNARY_OWN_F32(cos, std::cos)
KILN_UNARY_OWN_F32(tanh, std::tanh)
KILN_UNARY_OWN_F32(erf, std::erf)
KILN_UNARY_OWN_F32(erfc, std::erfc)
#undef KILN_UNARY_OWN_F32
#undef KILN_UNARY_LANES
#undef KILN_UNARY_STD

inline int64_t fabs(int64_t x) { return x < 0 ? -x : x; }
inline int32_t fabs(int32_t x) { return x < 0 ? -x : x; }
inline i64x fabs(i64x x) { return blend(x < 0, -x, x); }
inline i32x fabs(i32x x) { return blend(x < 0, -x, x); }

template <class S>
inline S rsqrt(S x) { return S(1) / sqrt(x); }
inline f32x rsqrt(f32x x) { return 1.0f / sqrt(x); }
inline f64x rsqrt(f64x x) { return 1.0 / sqrt(x); }
inline float reciprocal(float x) { return 1.0f / x; }

// Vectors per float32 block of a blocked (cascade) sum: its lanes fold into double after this many
// steps (codegen/reduction.py's REDUCTION_BLOCK, kiln::row_moments).
constexpr int64_t BLOCK_STEPS = 256;
inline double reciprocal(double x) { return 1.0 / x; }
inline f32x reciprocal(f32x x) { return 1.0f / x; }
inline f64x reciprocal(f64x x) { return 1.0 / x; }

// g++ folds std::pow(x, 0.5) into sqrt(x), which differs from pow at -0.0 and -inf (pow gives
// +0.0 and +inf, |x|; sqrt -0.0 and nan): those two are put right.
template <class S>
inline S pow(S a, S b) {
  return b == S(0.5) && (a == S(0) || a == -std::numeric_limits<S>::infinity()) ? std::fabs(a) : std::pow(a, b);
}
inline f32x pow(f32x a, f32x b) { return map2(a, b, [](float x, float y) { return pow(x, y); }); }
inline f64x pow(f64x a, f64x b) { return map2(a, b, [](double x, double y) { return pow(x, y); }); }
inline float atan2(float a, float b) { return std::atan2(a, b); }
inline double atan2(double a, double b) { return std::atan2(a, b); }
inline f32x atan2(f32x a, f32x b) { return map2(a, b, [](float x, float y) { return std::atan2(x, y); }); }
inline f64x atan2(f64x a, f64x b) { return map2(a, b, [](double x, double y) { return std::atan2(x, y); }); }
inline float fmod(float a, float b) { return std::fmod(a, b); }
inline double fmod(double a, double b) { return std::fmod(a, b); }
inline f32x fmod(f32x a, f32x b) { return map2(a, b, [](float x, float y) { return std::fmod(x, y); }); }
inline f64x fmod(f64x a, f64x b) { return map2(a, b, [](double x, double y) { return std::fmod(x, y); }); }
inline float copysign(float a, float b) { return std::copysign(a, b); }
inline double copysign(double a, double b) { return std::copysign(a, b); }
inline f32x copysign(f32x a, f32x b) { return map2(a, b, [](float x, float y) { return std::copysign(x, y); }); }
inline f64x copysign(f64x a, f64x b) { return map2(a, b, [](double x, double y) { return std::copysign(x, y); }); }

// Integer division and modulo with Python's floor semantics (sign of the divisor). A divisor of
// -1 is taken apart first: the minimum value divided by it overflows, which x86 traps (SIGFPE)
// where eager wraps (int64 min // -1 is int64 min, min % -1 is 0).
template <class I>
inline I negate_wrapping(I a) {
  return static_cast<I>(static_cast<std::make_unsigned_t<I>>(0) - static_cast<std::make_unsigned_t<I>>(a));
}
template <class I>
inline I floordiv(I a, I b) {
  if (b == -1) return negate_wrapping(a);
  I q = a / b;
  return q - static_cast<I>((a % b != 0) && ((a < 0) != (b < 0)));
}
template <class I>
inline I floormod(I a, I b) {
  if (b == -1) return I(0);
  I r = a % b;
  return r + static_cast<I>((r != 0) && ((r < 0) != (b < 0))) * b;
}
inline i64x floordiv(i64x a, i64x b) { return map2(a, b, [](int64_t x, int64_t y) { return floordiv(x, y); }); }
inline i32x floordiv(i32x a, i32x b) { return map2(a, b, [](int32_t x, int32_t y) { return floordiv(x, y); }); }
inline i64x floormod(i64x a, i64x b) { return map2(a, b, [](int64_t x, int64_t y) { return floormod(x, y); }); }
inline i32x floormod(i32x a, i32x b) { return map2(a, b, [](int32_t x, int32_t y) { return floormod(x, y); }); }
// Float floor division as eager computes it: from the exact fmod, not floor(a / b), which differs
// where a / b rounds or overflows (inf // 100 is nan, -1 // inf is -1, 1e300 // -1e-300 is -inf).
template <class F>
inline F floordiv_float(F a, F b) {
  if (b == 0) return a / b;
  F mod = std::fmod(a, b);
  F div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= F(1);
  if (div == 0) return std::copysign(F(0), a / b);
  F floored = std::floor(div);
  return div - floored > F(0.5) ? floored + F(1) : floored;
}
inline float floordiv(float a, float b) { return floordiv_float(a, b); }
inline double floordiv(double a, double b) { return floordiv_float(a, b); }
inline f32x floordiv(f32x a, f32x b) { return map2(a, b, [](float x, float y) { return floordiv_float(x, y); }); }
inline f64x floordiv(f64x a, f64x b) { return map2(a, b, [](double x, double y) { return floordiv_float(x, y); }); }
inline float floormod(float a, float b) {
  float r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
inline double floormod(double a, double b) {
  double r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
inline f32x floormod(f32x a, f32x b) { return map2(a, b, [](float x, float y) { return floormod(x, y); }); }
inline f64x floormod(f64x a, f64x b) { return map2(a, b, [](double x, double y) { return floormod(x, y); }); }
template <class I>
inline I truncdiv(I a, I b) { return b == -1 ? negate_wrapping(a) : a / b; }
inline i64x truncdiv(i64x a, i64x b) { return map2(a, b, [](int64_t x, int64_t y) { return truncdiv(x, y); }); }
inline i32x truncdiv(i32x a, i32x b) { return map2(a, b, [](int32_t x, int32_t y) { return truncdiv(x, y); }); }
// C's integer remainder (the sign of the dividend), with the -1 divisor taken apart as above.
inline int64_t fmod(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
inline int32_t fmod(int32_t a, int32_t b) { return b == -1 ? 0 : a % b; }
inline i64x fmod(i64x a, i64x b) { return map2(a, b, [](int64_t x, int64_t y) { return fmod(x, y); }); }
inline i32x fmod(i32x a, i32x b) { return map2(a, b, [](int32_t x, int32_t y) { return fmod(x, y); }); }

// maximum/minimum propagate NaN, as torch.maximum does.
template <class S>
inline S maximum(S a, S b) { return (a != a || a > b) ? a : b; }
template <class S>
inline S minimum(S a, S b) { return (a != a || a < b) ? a : b; }
inline f32x maximum(f32x a, f32x b) { return blend(vne(a, a) | vgt(a, b), a, b); }
inline f32x minimum(f32x a, f32x b) { return blend(vne(a, a) | vlt(a, b), a, b); }
inline f64x maximum(f64x a, f64x b) { return blend(vne(a, a) | vgt(a, b), a, b); }
inline f64x minimum(f64x a, f64x b) { return blend(vne(a, a) | vlt(a, b), a, b); }
inline i64x maximum(i64x a, i64x b) { return blend(vgt(a, b), a, b); }
inline i64x minimum(i64x a, i64x b) { return blend(vlt(a, b), a, b); }
inline i32x maximum(i32x a, i32x b) { return blend(vgt(a, b), a, b); }
inline i32x minimum(i32x a, i32x b) { return blend(vlt(a, b), a, b); }

inline maskx isnan(f32x x) { return x != x; }
inline maskx isnan(f64x x) { return __builtin_convertvector(x != x, maskx); }
inline bool isnan(float x) { return x != x; }
inline bool isnan(double x) { return x != x; }
inline maskx isinf(f32x x) { return (x == INFINITY) | (x == -INFINITY); }
inline maskx isinf(f64x x) { return __builtin_convertvector((x == INFINITY) | (x == -INFINITY), maskx); }
inline bool isinf(float x) { return std::isinf(x); }
inline bool isinf(double x) { return std::isinf(x); }

template <class S>
inline S sign(S x) { return static_cast<S>((S(0) < x) - (x < S(0))); }
inline i32x sign(i32x x) { return (x < 0) - (x > 0); }
inline i64x sign(i64x x) { return (x < 0) - (x > 0); }
// The sign bit read directly: g++ 12 crashes (internal compiler error) on std::signbit of a float
// converted from a half in the same loop.
inline bool signbit(float x) { uint32_t b; std::memcpy(&b, &x, sizeof b); return (b >> 31) != 0; }
inline bool signbit(double x) { uint64_t b; std::memcpy(&b, &x, sizeof b); return (b >> 63) != 0; }
template <class I>
inline bool signbit(I x) { return x < 0; }
inline maskx signbit(f32x x) { i32x b; std::memcpy(&b, &x, sizeof b); return b < 0; }
inline maskx signbit(f64x x) { i64x b; std::memcpy(&b, &x, sizeof b); return __builtin_convertvector(b < 0, maskx); }
inline maskx signbit(i32x x) { return x < 0; }
inline maskx signbit(i64x x) { return __builtin_convertvector(x < 0, maskx); }
// NaN and -0.0 give +0, as eager (and the scalar sign above): `x * 0` kept NaN and -0.0.
inline f32x sign(f32x x) { return where(x > 0.0f, splat<f32x>(1), where(x < 0.0f, splat<f32x>(-1), splat<f32x>(0))); }
inline f64x sign(f64x x) { return where(gt(x, splat<f64x>(0)), splat<f64x>(1), where(lt(x, splat<f64x>(0)), splat<f64x>(-1), splat<f64x>(0))); }

}  // namespace kiln

#include "kiln_cpu_math.h"
#include "kiln_cpu_reduce.h"
#include "kiln_cpu_checks.h"
