#include "runtime/cuda/vector_add.h"

#include <cuda_runtime.h>

namespace lockstep::cuda {
namespace {

__global__ void VectorAddKernel(const float* a, const float* b, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

}  // namespace

int VectorAdd(const float* a, const float* b, float* out, int n) {
  float *da = nullptr, *db = nullptr, *dout = nullptr;
  const size_t bytes = sizeof(float) * static_cast<size_t>(n);
  cudaError_t err = cudaMalloc(&da, bytes);
  if (err == cudaSuccess) err = cudaMalloc(&db, bytes);
  if (err == cudaSuccess) err = cudaMalloc(&dout, bytes);
  if (err == cudaSuccess) err = cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) {
    VectorAddKernel<<<(n + 255) / 256, 256>>>(da, db, dout, n);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
  return static_cast<int>(err);
}

}  // namespace lockstep::cuda
