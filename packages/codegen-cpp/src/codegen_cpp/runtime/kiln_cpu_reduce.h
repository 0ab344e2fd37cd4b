// kiln_cpu_reduce.h: reduction accumulators, horizontal reductions, random numbers (included by
// kiln_cpu.h).
#pragma once

namespace kiln {

// ---------------------------------------------------------------- identities
template <class S>
inline S max_identity() {
  return std::numeric_limits<S>::has_infinity ? -std::numeric_limits<S>::infinity()
                                              : std::numeric_limits<S>::lowest();
}
template <class S>
inline S min_identity() {
  return std::numeric_limits<S>::has_infinity ? std::numeric_limits<S>::infinity()
                                              : std::numeric_limits<S>::max();
}

// ---------------------------------------------------------------- horizontal reductions
// Halving steps (lane i meets lane i ^ 8 (16 lanes), ^ 4, ^ 2, ^ 1) instead of VEC - 1 dependent
// scalar steps: a short row (softmax over 64 keys) pays its horizontal reductions once per row.
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
template <class V, class F>
inline typename elem<V>::type hreduce(V v, F f) {
#if KILN_VEC == 16
  v = f(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = f(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = f(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = f(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
#else
  v = f(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));
  v = f(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5));
  v = f(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6));
#endif
  return v[0];
}
#else
template <class V, class F>
inline typename elem<V>::type hreduce(V v, F f) {
  V r = v;
  for (int64_t i = 1; i < VEC; ++i) {
    V lane = splat<V>(v[i]);
    r = f(r, lane);
  }
  return r[0];
}
#endif
template <class V>
inline typename elem<V>::type hsum(V v) {
  return hreduce(v, [](V a, V b) { return a + b; });
}
template <class V>
inline typename elem<V>::type hprod(V v) {
  return hreduce(v, [](V a, V b) { return a * b; });
}
template <class V>
inline typename elem<V>::type hmax(V v) {
  return hreduce(v, [](V a, V b) { return maximum(a, b); });
}
template <class V>
inline typename elem<V>::type hmin(V v) {
  return hreduce(v, [](V a, V b) { return minimum(a, b); });
}
inline bool hany(maskx m) { return any_lane(m); }

// ---------------------------------------------------------------- argmax / argmin
// First occurrence wins; NaN counts as the largest (argmax) and the smallest (argmin) value.
template <class S>
struct ArgAcc {
  S value;
  int64_t index;
};
template <class S>
inline bool arg_better(bool is_max, S v, int64_t i, S best, int64_t best_i) {
  if (v != v) return best == best || i < best_i;
  if (best != best) return false;
  if (v == best) return i < best_i;
  return is_max ? v > best : v < best;
}
template <class S>
inline ArgAcc<S> arg_init(bool is_max) {
  return ArgAcc<S>{is_max ? max_identity<S>() : min_identity<S>(), std::numeric_limits<int64_t>::max()};
}
template <class S>
inline void arg_update(bool is_max, ArgAcc<S>& acc, S v, int64_t i) {
  if (arg_better(is_max, v, i, acc.value, acc.index)) {
    acc.value = v;
    acc.index = i;
  }
}
template <class V>
struct ArgAccVec {
  V value;
  i64x index;
};
template <class V>
inline ArgAccVec<V> arg_init_vec(bool is_max) {
  typedef typename elem<V>::type S;
  return ArgAccVec<V>{splat<V>(is_max ? max_identity<S>() : min_identity<S>()),
                      splat<i64x>(std::numeric_limits<int64_t>::max())};
}
template <class V>
inline void arg_update_vec(bool is_max, ArgAccVec<V>& acc, V v, int64_t base) {
  for (int64_t lane = 0; lane < VEC; ++lane) {
    if (arg_better(is_max, v[lane], base + lane, acc.value[lane], acc.index[lane])) {
      acc.value[lane] = v[lane];
      acc.index[lane] = base + lane;
    }
  }
}
// Vectorized across outputs: lane i accumulates output i, all lanes see reduction index `index`.
template <class V>
inline void arg_update_lanes(bool is_max, ArgAccVec<V>& acc, V v, int64_t index) {
  for (int64_t lane = 0; lane < VEC; ++lane) {
    if (arg_better(is_max, v[lane], index, acc.value[lane], acc.index[lane])) {
      acc.value[lane] = v[lane];
      acc.index[lane] = index;
    }
  }
}
template <class V>
inline i64x arg_result(const ArgAccVec<V>& acc) {
  return acc.index == std::numeric_limits<int64_t>::max() ? splat<i64x>(0) : acc.index;
}
// The index of the best of a vector accumulator and a scalar one (0 when nothing was seen).
template <class V, class S>
inline int64_t arg_finish(bool is_max, const ArgAccVec<V>& vec, ArgAcc<S> acc) {
  for (int64_t lane = 0; lane < VEC; ++lane) arg_update(is_max, acc, static_cast<S>(vec.value[lane]), vec.index[lane]);
  return acc.index == std::numeric_limits<int64_t>::max() ? 0 : acc.index;
}
template <class S>
inline int64_t arg_finish(bool /*is_max*/, ArgAcc<S> acc) {
  return acc.index == std::numeric_limits<int64_t>::max() ? 0 : acc.index;
}

// ---------------------------------------------------------------- moments of a stored row
// The mean and m2 (sum of squared deviations) of the n floats of one row, stored by the reduction
// loop in a scratch array on the stack (the row stays in L1/L2), in two passes over it:
//   1. the sum of the values shifted by the first one -> the mean (a large mean with a small spread
//      keeps its precision: the shifted values are exact, Sterbenz);
//   2. the squared deviations d = x - mean and their sum, m2 = sum(d^2) - (sum d)^2 / n (the second
//      term removes what the mean's rounding adds), and the mean refined by sum(d) / n.
// Every step is independent, where a one-pass Welford update is a chain of dependent operations per
// vector: a 4096 x 512 layer norm on one thread took 0.77 ms by Welford, 0.40 ms this way (eager
// 0.57 ms). float32 lanes fold into double after every BLOCK_STEPS vectors, as blocked sums do.
struct Moments {
  double mean;
  double m2;
};
// Sums of f(x) over [begin, end) (a whole number of vectors) in two float32 accumulators (two
// independent chains of adds), one horizontal sum in double at the end.
template <class F>
inline double sum_vectors(const float* values, int64_t begin, int64_t end, F f) {
  f32x first = splat<f32x>(0.0f);
  f32x second = splat<f32x>(0.0f);
  int64_t i = begin;
  for (; i + 2 * VEC <= end; i += 2 * VEC) {
    first = first + f(load(values + i));
    second = second + f(load(values + i + VEC));
  }
  if (i < end) first = first + f(load(values + i));
  return hsum(convert<f64x>(first + second));
}
inline Moments row_moments(const float* values, int64_t n) {
  const int64_t vec_end = n / VEC * VEC;
  const int64_t block = BLOCK_STEPS * VEC;  // float32 lanes add at most BLOCK_STEPS terms each
  // The first value shifts every term (a constant row sums to exactly 0); an infinite or NaN one
  // would make every term NaN (inf - inf), so such a row is not shifted.
  const float shift = std::isfinite(values[0]) ? values[0] : 0.0f;
  const f32x shift_vec = splat<f32x>(shift);
  double total = 0.0;
  for (int64_t b = 0; b < vec_end; b += block)
    total += sum_vectors(values, b, b + block < vec_end ? b + block : vec_end, [&](f32x v) { return v - shift_vec; });
  for (int64_t i = vec_end; i < n; ++i) total += static_cast<double>(values[i] - shift);
  const float mean = static_cast<float>(static_cast<double>(shift) + total / static_cast<double>(n));
  if (!std::isfinite(mean)) {
    // An infinite value in the row: the mean is +-inf (NaN for both signs, or a NaN), as torch.mean
    // gives it, and the variance NaN, made as eager's deviations make it (inf - inf: the CPU's default
    // NaN, sign bit set on x86; a NaN in the row passes on its own).
    const double m = static_cast<double>(mean);
    return Moments{m, m - m};
  }
  const f32x mean_vec = splat<f32x>(mean);
  double squares = 0.0;
  double deviations = 0.0;
  for (int64_t b = 0; b < vec_end; b += block) {
    const int64_t stop = b + block < vec_end ? b + block : vec_end;
    squares += sum_vectors(values, b, stop, [&](f32x v) { const f32x d = v - mean_vec; return d * d; });
    deviations += sum_vectors(values, b, stop, [&](f32x v) { return v - mean_vec; });
  }
  for (int64_t i = vec_end; i < n; ++i) {
    const double d = static_cast<double>(values[i] - mean);
    squares += d * d;
    deviations += d;
  }
  if (std::isinf(squares)) {
    // A square or a float32 lane's sum of squares past float32's range (|d| near 1e19), where the
    // variance may still be a float32 value: the squares again, in double.
    squares = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(values[i]) - static_cast<double>(mean);
      squares += d * d;
    }
  }
  double m2 = squares - deviations * deviations / static_cast<double>(n);
  if (m2 < 0.0) m2 = 0.0;  // rounding of a constant row; NaN stays NaN
  return Moments{static_cast<double>(mean) + deviations / static_cast<double>(n), m2};
}

// ---------------------------------------------------------------- random numbers
// A counter-based generator: a 64-bit mix of (seed, offset). Matches eager in distribution only.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline float rand(int64_t seed, int64_t offset) {
  uint64_t h = mix64(mix64(static_cast<uint64_t>(seed)) + static_cast<uint64_t>(offset) * 0x9e3779b97f4a7c15ull);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}
inline float randn(int64_t seed, int64_t offset) {
  uint64_t h = mix64(mix64(static_cast<uint64_t>(seed) ^ 0x5851f42d4c957f2dull) +
                     static_cast<uint64_t>(offset) * 0x9e3779b97f4a7c15ull);
  double u1 = (static_cast<double>(h >> 40) + 1.0) * (1.0 / 16777217.0);
  double u2 = static_cast<double>(h & 0xffffffull) * (1.0 / 16777216.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}
inline f32x rand(i64x seed, i64x offset) {
  f32x r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = rand(seed[i], offset[i]);
  return r;
}
inline f32x randn(i64x seed, i64x offset) {
  f32x r;
  for (int64_t i = 0; i < VEC; ++i) r[i] = randn(seed[i], offset[i]);
  return r;
}

}  // namespace kiln
