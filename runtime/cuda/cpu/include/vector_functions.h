// The make_* constructors of CUDA's vector types (vector_types.h).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_VECTOR_FUNCTIONS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_VECTOR_FUNCTIONS_H_

#include "vector_types.h"

inline constexpr int2 make_int2(int x, int y) { return int2{x, y}; }
inline constexpr int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
inline constexpr int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline constexpr uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline constexpr uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
inline constexpr uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return uint4{x, y, z, w};
}
inline constexpr float2 make_float2(float x, float y) { return float2{x, y}; }
inline constexpr float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline constexpr float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}
inline constexpr double2 make_double2(double x, double y) { return double2{x, y}; }

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_VECTOR_FUNCTIONS_H_
