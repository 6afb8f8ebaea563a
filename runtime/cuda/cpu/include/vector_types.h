// CUDA's built-in vector types as the CPU execution layer defines them: the names,
// members and alignments the device uses (int2/uint2/float2 are 8-byte aligned,
// int4/uint4/float4/double2 16-byte aligned), so a kernel's `reinterpret_cast` to
// `uint4*` has the device's alignment requirement here too. dim3 defaults to 1s.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_VECTOR_TYPES_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_VECTOR_TYPES_H_

struct char4 {
  signed char x, y, z, w;
};
struct alignas(4) uchar4 {
  unsigned char x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct int3 {
  int x, y, z;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned int x, y;
};
struct uint3 {
  unsigned int x, y, z;
};
struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct float3 {
  float x, y, z;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};

// A launch's grid or block shape; every dimension not given is 1.
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

static_assert(sizeof(uint4) == 16 && alignof(uint4) == 16);
static_assert(sizeof(float2) == 8 && alignof(float2) == 8);
static_assert(sizeof(uint3) == 12 && alignof(uint3) == 4);
static_assert(sizeof(dim3) == 12);

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_VECTOR_TYPES_H_
