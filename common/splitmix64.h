// The splitmix64 step and the counter-based uniform draw built on it, as constexpr
// functions that host code and CUDA device code both call (no other dependency), so a
// draw made on the GPU has the same bits as the CPU sampler's (runtime/engine/cpu/sampler.h).
#ifndef LOCKSTEP_COMMON_SPLITMIX64_H_
#define LOCKSTEP_COMMON_SPLITMIX64_H_

#include <cstdint>

#if defined(__CUDACC__)
#define LOCKSTEP_HOST_DEVICE __host__ __device__
#else
#define LOCKSTEP_HOST_DEVICE
#endif

namespace lockstep {

// The golden-ratio increment of splitmix64 (2^64 / phi, odd).
inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ull;

// The splitmix64 step: adds the increment to `x`, then applies the finalizer.
// Vigna's generator is SplitMix64(state), state += kSplitMix64Gamma; counter-based
// streams here use SplitMix64(state++) or state = SplitMix64(state).
LOCKSTEP_HOST_DEVICE constexpr uint64_t SplitMix64(uint64_t x) {
  x += kSplitMix64Gamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) (53 bits) from (seed, position, purpose): three chained rounds.
LOCKSTEP_HOST_DEVICE constexpr double CounterUniform01(uint64_t seed, int64_t position,
                                                       uint64_t purpose) {
  uint64_t h = SplitMix64(seed);
  h = SplitMix64(h ^ static_cast<uint64_t>(position));
  h = SplitMix64(h ^ purpose);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SPLITMIX64_H_
