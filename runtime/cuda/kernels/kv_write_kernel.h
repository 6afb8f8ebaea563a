// Launcher of the KV write: scatters one layer's K and V rows of a step into their
// sequences' blocks through the device block table (the CPU engine's WriteKv,
// runtime/engine/cpu/paged_attention.h, for a whole step at once).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_KV_WRITE_KERNEL_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_KV_WRITE_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda::kernels {

// For t < tokens: the [num_kv_heads][head_dim] rows at k + t * row_stride and
// v + t * row_stride go to position positions[t] of sequence seqs[t] in `layer`; a
// negative seqs[t] (a pad row) writes nothing. Positions must be covered by the
// sequences' block tables and distinct per sequence. The element type must be the
// pool's (kv.element_bytes), else cudaErrorInvalidValue.
cudaError_t LaunchWriteKv(const PagedKvDesc& kv, int layer, const Bf16* k, const Bf16* v,
                          int64_t row_stride, const int32_t* seqs, const int32_t* positions,
                          int tokens, cudaStream_t stream);
cudaError_t LaunchWriteKv(const PagedKvDesc& kv, int layer, const float* k, const float* v,
                          int64_t row_stride, const int32_t* seqs, const int32_t* positions,
                          int tokens, cudaStream_t stream);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_KV_WRITE_KERNEL_H_
