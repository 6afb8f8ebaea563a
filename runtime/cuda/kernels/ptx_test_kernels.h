// Kernels that exercise ptx.h for ptx_test: one warp's m16n8k16 bf16 MMA, an ldmatrix x4
// from shared memory, and a two-stage cp.async copy. Raw-pointer launchers (device
// memory); each returns the launch's error.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_PTX_TEST_KERNELS_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_PTX_TEST_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lockstep::cuda::kernels {

// d[16][8] = a[16][16] (bf16 bits, row-major) * b[16][8] (bf16 bits, b[k][n]) + c[16][8],
// through the lanes' fragments as ptx.h lays them out.
cudaError_t LaunchPtxMma(const uint16_t* a, const uint16_t* b, const float* c, float* d,
                         cudaStream_t stream);

// tile: 32 rows of 8 b16 (four 8 x 8 matrices, matrix j = rows 8j..8j+7), copied to
// shared memory; out[lane * 4 + j] = the register j lane `lane` receives from ldmatrix x4.
cudaError_t LaunchPtxLdMatrix(const uint16_t* tile, uint32_t* out, cudaStream_t stream);

// 32 threads copy in[0..64) (16-byte items, two stages of 32) into shared memory with
// cp.async (one commit group per stage) over a shared buffer filled with `sentinel`
// first, wait for both groups unless `skip_wait`, and write the shared buffer to out.
cudaError_t LaunchPtxCpAsync(const int4* in, int4* out, int sentinel, bool skip_wait,
                             cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_PTX_TEST_KERNELS_H_
