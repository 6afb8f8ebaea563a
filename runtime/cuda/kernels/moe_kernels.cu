#include "runtime/cuda/kernels/moe_kernels.h"

#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cuda/kernels/device_util.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kRouteWarps = 4;
constexpr int kPermuteThreads = 1024;
constexpr int kThreads = 256;

// One warp per row; probabilities in shared memory.
__global__ void MoeRouteKernel(const float* logits, int rows, int num_experts, int k,
                               bool renormalize, int32_t* experts, float* weights) {
  __shared__ float probs_all[kRouteWarps][kMaxMoeExperts];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kRouteWarps + warp;
  if (row >= rows) return;
  float* probs = probs_all[warp];
  const float* x = logits + static_cast<int64_t>(row) * num_experts;
  float max_value = -INFINITY;
  for (int e = lane; e < num_experts; e += 32) max_value = fmaxf(max_value, x[e]);
  max_value = WarpMax(max_value);
  float sum = 0.0f;
  for (int e = lane; e < num_experts; e += 32) {
    probs[e] = expf(x[e] - max_value);
    sum += probs[e];
  }
  const float inv = 1.0f / WarpSum(sum);
  for (int e = lane; e < num_experts; e += 32) probs[e] *= inv;
  __syncwarp();
  int chosen[kMaxMoeTopK];
  float chosen_weight[kMaxMoeTopK];
  for (int j = 0; j < k; ++j) {
    // The lane's best untaken expert (lowest id among equals), then across the warp.
    float best_value = -INFINITY;
    int best = num_experts;
    // Untaken probabilities are >= 0 and taken ones -inf; strict > keeps the lowest id.
    for (int e = lane; e < num_experts; e += 32) {
      if (probs[e] > best_value) {
        best_value = probs[e];
        best = e;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other_value = __shfl_xor_sync(0xffffffffu, best_value, offset);
      const int other = __shfl_xor_sync(0xffffffffu, best, offset);
      if (other_value > best_value || (other_value == best_value && other < best)) {
        best_value = other_value;
        best = other;
      }
    }
    chosen[j] = best;
    chosen_weight[j] = best_value;
    __syncwarp();
    if (lane == 0) probs[best] = -INFINITY;
    __syncwarp();
  }
  if (lane != 0) return;
  for (int a = 1; a < k; ++a) {  // ascending expert id
    for (int b = a; b > 0 && chosen[b - 1] > chosen[b]; --b) {
      const int e = chosen[b - 1];
      chosen[b - 1] = chosen[b];
      chosen[b] = e;
      const float w = chosen_weight[b - 1];
      chosen_weight[b - 1] = chosen_weight[b];
      chosen_weight[b] = w;
    }
  }
  float total = 0.0f;
  for (int j = 0; j < k; ++j) total += chosen_weight[j];
  for (int j = 0; j < k; ++j) {
    experts[static_cast<int64_t>(row) * k + j] = chosen[j];
    weights[static_cast<int64_t>(row) * k + j] =
        renormalize ? chosen_weight[j] / total : chosen_weight[j];
  }
}

// One CTA: each thread owns experts e = tid, tid + blockDim, ... and scans the entries in
// order, so each expert's entries keep their order.
__global__ void MoePermuteKernel(const int32_t* experts, int entries, int num_experts,
                                 int32_t* offsets, int32_t* entry_of_slot, int32_t* slot_of_entry) {
  __shared__ int32_t counts[kMaxMoeExperts + 1];
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    int32_t count = 0;
    for (int i = 0; i < entries; ++i) count += experts[i] == e;
    counts[e] = count;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t total = 0;
    for (int e = 0; e < num_experts; ++e) {
      const int32_t count = counts[e];
      counts[e] = total;
      offsets[e] = total;
      total += count;
    }
    offsets[num_experts] = total;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    int32_t slot = counts[e];
    for (int i = 0; i < entries; ++i) {
      if (experts[i] == e) {
        entry_of_slot[slot] = i;
        slot_of_entry[i] = slot;
        ++slot;
      }
    }
  }
}

__global__ void MoeGatherKernel(const Bf16* x, int hidden, const int32_t* entry_of_slot, int k,
                                Bf16* x_perm) {
  const int64_t slot = blockIdx.x;
  const int64_t row = entry_of_slot[slot] / k;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    x_perm[slot * hidden + i] = x[row * hidden + i];
  }
}

__global__ void MoeCombineKernel(const Bf16* y_perm, int hidden, const int32_t* slot_of_entry,
                                 const float* weights, int k, Bf16* out) {
  const int64_t row = blockIdx.x;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int64_t slot = slot_of_entry[row * k + j];
      acc = fmaf(weights[row * k + j], LoadBf16(y_perm + slot * hidden + i), acc);
    }
    StoreBf16(out + row * hidden + i, acc);
  }
}

}  // namespace

cudaError_t LaunchMoeRoute(const float* logits, int rows, int num_experts, int k, bool renormalize,
                           int32_t* experts, float* weights, cudaStream_t stream) {
  if (num_experts < 1 || num_experts > kMaxMoeExperts || k < 1 || k > kMaxMoeTopK ||
      k > num_experts) {
    return cudaErrorInvalidValue;
  }
  if (rows <= 0) return cudaSuccess;
  MoeRouteKernel<<<(rows + kRouteWarps - 1) / kRouteWarps, kRouteWarps * 32, 0, stream>>>(
      logits, rows, num_experts, k, renormalize, experts, weights);
  return cudaGetLastError();
}

cudaError_t LaunchMoePermute(const int32_t* experts, int entries, int num_experts, int32_t* offsets,
                             int32_t* entry_of_slot, int32_t* slot_of_entry, cudaStream_t stream) {
  if (num_experts < 1 || num_experts > kMaxMoeExperts || entries < 0) return cudaErrorInvalidValue;
  MoePermuteKernel<<<1, kPermuteThreads, 0, stream>>>(experts, entries, num_experts, offsets,
                                                      entry_of_slot, slot_of_entry);
  return cudaGetLastError();
}

cudaError_t LaunchMoeGather(const Bf16* x, int hidden, const int32_t* entry_of_slot, int entries,
                            int k, Bf16* x_perm, cudaStream_t stream) {
  if (entries <= 0 || hidden <= 0) return cudaSuccess;
  MoeGatherKernel<<<entries, kThreads, 0, stream>>>(x, hidden, entry_of_slot, k, x_perm);
  return cudaGetLastError();
}

cudaError_t LaunchMoeCombine(const Bf16* y_perm, int hidden, const int32_t* slot_of_entry,
                             const float* weights, int rows, int k, Bf16* out,
                             cudaStream_t stream) {
  if (rows <= 0 || hidden <= 0) return cudaSuccess;
  MoeCombineKernel<<<rows, kThreads, 0, stream>>>(y_perm, hidden, slot_of_entry, weights, k, out);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda::kernels
