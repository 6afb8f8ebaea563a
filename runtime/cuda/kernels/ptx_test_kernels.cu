#include "runtime/cuda/kernels/ptx_test_kernels.h"

#include "runtime/cuda/kernels/launch.h"
#include "runtime/cuda/kernels/ptx.h"

namespace lockstep::cuda::kernels {
namespace {

__device__ uint32_t Pair(const uint16_t* low, const uint16_t* high) {
  return static_cast<uint32_t>(*low) | (static_cast<uint32_t>(*high) << 16);
}

__global__ void PtxMma(const uint16_t* a, const uint16_t* b, const float* c, float* d) {
  const int lane = threadIdx.x;
  const int g = lane / 4;
  const int t = lane % 4;
  uint32_t af[4];
  af[0] = Pair(&a[g * 16 + 2 * t], &a[g * 16 + 2 * t + 1]);
  af[1] = Pair(&a[(g + 8) * 16 + 2 * t], &a[(g + 8) * 16 + 2 * t + 1]);
  af[2] = Pair(&a[g * 16 + 2 * t + 8], &a[g * 16 + 2 * t + 9]);
  af[3] = Pair(&a[(g + 8) * 16 + 2 * t + 8], &a[(g + 8) * 16 + 2 * t + 9]);
  uint32_t bf[2];
  bf[0] = Pair(&b[(2 * t) * 8 + g], &b[(2 * t + 1) * 8 + g]);
  bf[1] = Pair(&b[(2 * t + 8) * 8 + g], &b[(2 * t + 9) * 8 + g]);
  float cf[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                 c[(g + 8) * 8 + 2 * t + 1]};
  float df[4];
  ptx::MmaM16N8K16Bf16(df, af, bf, cf);
  d[g * 8 + 2 * t] = df[0];
  d[g * 8 + 2 * t + 1] = df[1];
  d[(g + 8) * 8 + 2 * t] = df[2];
  d[(g + 8) * 8 + 2 * t + 1] = df[3];
}

__global__ void PtxLdMatrix(const uint16_t* tile, uint32_t* out) {
  __shared__ uint4 storage[32];  // 16-byte rows, 16-byte aligned
  uint16_t* shared = reinterpret_cast<uint16_t*>(storage);
  const int lane = threadIdx.x;
  for (int i = 0; i < 8; ++i) shared[lane * 8 + i] = tile[lane * 8 + i];
  __syncwarp();
  uint32_t r[4];
  ptx::LdMatrixX4(r, &shared[lane * 8]);  // lane l gives row l: matrix l / 8, row l % 8
  for (int j = 0; j < 4; ++j) out[lane * 4 + j] = r[j];
}

__global__ void PtxCpAsync(const int4* in, int4* out, int sentinel, bool skip_wait) {
  __shared__ int4 stages[64];
  const int t = threadIdx.x;
  const int4 fill = {sentinel, sentinel, sentinel, sentinel};
  stages[t] = fill;
  stages[t + 32] = fill;
  __syncthreads();
  ptx::CpAsync16(&stages[t], &in[t]);
  ptx::CpAsyncCommit();
  ptx::CpAsync16(&stages[t + 32], &in[t + 32]);
  ptx::CpAsyncCommit();
  if (!skip_wait) {
    ptx::CpAsyncWait<1>();  // the first stage is in
    ptx::CpAsyncWait<0>();  // and the second
  }
  __syncthreads();
  out[t] = stages[t];
  out[t + 32] = stages[t + 32];
}

}  // namespace

cudaError_t LaunchPtxMma(const uint16_t* a, const uint16_t* b, const float* c, float* d,
                         cudaStream_t stream) {
  LOCKSTEP_LAUNCH(PtxMma, dim3(1), dim3(32), 0, stream)(a, b, c, d);
  return cudaGetLastError();
}

cudaError_t LaunchPtxLdMatrix(const uint16_t* tile, uint32_t* out, cudaStream_t stream) {
  LOCKSTEP_LAUNCH(PtxLdMatrix, dim3(1), dim3(32), 0, stream)(tile, out);
  return cudaGetLastError();
}

cudaError_t LaunchPtxCpAsync(const int4* in, int4* out, int sentinel, bool skip_wait,
                             cudaStream_t stream) {
  LOCKSTEP_LAUNCH(PtxCpAsync, dim3(1), dim3(32), 0, stream)(in, out, sentinel, skip_wait);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda::kernels
