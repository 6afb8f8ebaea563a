// The bf16 type and conversions of CUDA's <cuda_bf16.h>, as the CPU execution layer
// defines them for kernels compiled as C++ (//runtime/cuda/cpu:kernel). Float to bf16
// rounds to nearest even exactly as the device's cvt.rn.bf16.f32, subnormals and
// overflow included; a NaN becomes the canonical 0x7fff as on the device (host code's
// runtime/cuda/kernels/bf16.h keeps NaN payloads instead: the two differ on NaN only).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_BF16_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_BF16_H_

#include <cstdint>
#include <cstring>

struct __nv_bfloat16_raw {
  unsigned short x;
};

// Two bytes, the bits of a bf16 value (layout-compatible with the device's type).
struct __nv_bfloat16 {
  unsigned short __x;

  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(__nv_bfloat16_raw raw) : __x(raw.x) {}
  inline __nv_bfloat16(float f);
  inline operator float() const;
  constexpr operator __nv_bfloat16_raw() const { return {__x}; }
};
static_assert(sizeof(__nv_bfloat16) == 2 && alignof(__nv_bfloat16) == 2);

inline unsigned short __lockstep_float_to_bf16_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // any NaN: the device's canonical NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

inline float __bfloat162float(__nv_bfloat16 b) {
  const uint32_t u = static_cast<uint32_t>(b.__x) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16_raw{__lockstep_float_to_bf16_bits(f)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return __nv_bfloat16_raw{bits}; }

inline __nv_bfloat16::__nv_bfloat16(float f) : __x(__lockstep_float_to_bf16_bits(f)) {}
inline __nv_bfloat16::operator float() const { return __bfloat162float(*this); }

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUDA_BF16_H_
