// kiln_cpu_checks.h: runtime checks of indirect indices and integer divisors (included by kiln_cpu.h).
//
// A failed check never aborts, throws or traps: it records (site, value, size) in the library's
// failure record and the kernel goes on with a safe value (index 0, divisor 1), so it reads no
// memory out of bounds and divides by no zero. The Python caller (codegen_cpp/compile/loader.py)
// reads the record after the kernel returns and raises what eager PyTorch raises for the site.
// The first failure wins (a compare-and-swap on the site; threads of one kernel may race).
#pragma once

// The failure record {site, value, size}; site 0: none. Every translation unit of a library holds a
// weak definition, which the linker merges into one, exported for Python to read.
extern "C" {
__attribute__((weak, visibility("default"))) int64_t kiln_failure[3] = {0, 0, 0};
}

namespace kiln {

__attribute__((noinline, cold)) inline void fail(int64_t site, int64_t value, int64_t size) {
  int64_t none = 0;
  if (__atomic_compare_exchange_n(&kiln_failure[0], &none, site, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&kiln_failure[1], value, __ATOMIC_RELAXED);
    __atomic_store_n(&kiln_failure[2], size, __ATOMIC_RELAXED);
  }
}

// ---------------------------------------------------------------- indirect indices
// An index read from data: negative values count from the end when Wrap; the result must lie in
// [0, size). On failure the bad value is recorded and replaced by 0. Vector indices are checked
// lane by lane where gathers read them (codegen/checks.py), with these scalar functions.
template <bool Wrap>
inline int64_t checked_index(int64_t i, int64_t size, int64_t site) {
  const int64_t j = (Wrap && i < 0) ? i + size : i;
  if (__builtin_expect(static_cast<uint64_t>(j) >= static_cast<uint64_t>(size), 0)) {
    fail(site, i, size);
    return 0;
  }
  return j;
}
// A lane of a vector index that counts only when `active` (under ops.masked); else it is clamped.
template <bool Wrap>
inline int64_t checked_index(int64_t i, int64_t size, int64_t site, bool active) {
  const int64_t j = (Wrap && i < 0) ? i + size : i;
  if (__builtin_expect(static_cast<uint64_t>(j) >= static_cast<uint64_t>(size), 0)) {
    if (active) fail(site, i, size);
    return 0;
  }
  return j;
}
// A lane-invariant index in vector code under a mask: a failure when some lane is active.
template <bool Wrap>
inline int64_t checked_index(int64_t i, int64_t size, int64_t site, maskx active) {
  return checked_index<Wrap>(i, size, site, any_lane(active));
}

// Every lane of a vector index that no gather reads (a load through a stride-0 dim does not move
// with it): eager still raises for a bad value, so each lane is checked here, active lanes only.
template <bool Wrap>
inline void check_lanes(const i64x& i, int64_t size, int64_t site) {
  for (int64_t l = 0; l < VEC; ++l) checked_index<Wrap>(i[l], size, site);
}
template <bool Wrap>
inline void check_lanes(const i64x& i, int64_t size, int64_t site, maskx active) {
  for (int64_t l = 0; l < VEC; ++l) checked_index<Wrap>(i[l], size, site, active[l] != 0);
}

// ---------------------------------------------------------------- integer divisors
// A divisor of 0 (SIGFPE in an integer division) fails; the division goes on by 1.
template <class I>
inline I checked_divisor(I b, int64_t site) {
  if (__builtin_expect(b == 0, 0)) {
    fail(site, 0, 0);
    return 1;
  }
  return b;
}
template <class I>
inline I checked_divisor(I b, int64_t site, maskx active) {
  if (__builtin_expect(b == 0, 0)) {
    if (any_lane(active)) fail(site, 0, 0);
    return 1;
  }
  return b;
}
// Vectors: every lane of 0 becomes 1 (none may divide by zero); an active one fails.
template <class V>
__attribute__((noinline, cold)) V fix_divisor_lanes(V b, int64_t site, maskx active) {
  bool failed = false;
  for (int64_t l = 0; l < VEC; ++l) {
    if (b[l] == 0) {
      if (active[l] && !failed) {
        fail(site, 0, 0);
        failed = true;
      }
      b[l] = 1;
    }
  }
  return b;
}
inline i64x checked_divisor(i64x b, int64_t site, maskx active = splat_mask(true)) {
  bool zero = false;  // lane by lane: the lanes come straight from memory, as the division's do
  for (int64_t l = 0; l < VEC; ++l) zero |= b[l] == 0;
  return __builtin_expect(zero, 0) ? fix_divisor_lanes(b, site, active) : b;
}
inline i32x checked_divisor(i32x b, int64_t site, maskx active = splat_mask(true)) {
  return __builtin_expect(any_lane(b == 0), 0) ? fix_divisor_lanes(b, site, active) : b;
}

}  // namespace kiln
