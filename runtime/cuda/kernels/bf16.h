// bf16 as raw bits on the host side of the kernel launchers (no CUDA header needed):
// the launchers take `Bf16*`, the kernels read them as __nv_bfloat16 (same layout).
// FloatToBf16 rounds to nearest even (NaN stays NaN), as __float2bfloat16 does.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_BF16_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_BF16_H_

#include <cstdint>
#include <cstring>

namespace lockstep::cuda::kernels {

struct Bf16 {
  uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2);

inline Bf16 FloatToBf16(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}

inline float Bf16ToFloat(Bf16 b) {
  const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// f rounded to the nearest bf16, as a float.
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_BF16_H_
