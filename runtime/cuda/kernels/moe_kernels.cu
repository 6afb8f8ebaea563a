#include "runtime/cuda/kernels/moe_kernels.h"

#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cuda/kernels/device_util.h"
#include "runtime/cuda/kernels/launch.h"

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
  // Probabilities are >= 0 or NaN (any NaN or infinite logit makes them all NaN), so
  // -inf marks a taken expert and a NaN ranks as -1, below every number: as the CPU's
  // RouteTopK, a NaN row picks experts 0..k-1, and every round picks an untaken expert
  // in [0, num_experts) (k <= num_experts).
  for (int j = 0; j < k; ++j) {
    // The lane's best untaken expert (lowest id among equals), then across the warp.
    float best_key = -INFINITY;
    int best = num_experts;
    for (int e = lane; e < num_experts; e += 32) {
      if (probs[e] == -INFINITY) continue;
      const float key = isnan(probs[e]) ? -1.0f : probs[e];
      if (best == num_experts || key > best_key) {
        best_key = key;
        best = e;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other_key = __shfl_xor_sync(0xffffffffu, best_key, offset);
      const int other = __shfl_xor_sync(0xffffffffu, best, offset);
      // A lane with no candidate holds (-inf, num_experts): it loses to any candidate.
      if (other_key > best_key || (other_key == best_key && other < best)) {
        best_key = other_key;
        best = other;
      }
    }
    chosen[j] = best;
    chosen_weight[j] = probs[best];
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

template <typename T>
__global__ void MoeGatherKernel(const T* x, int hidden, const int32_t* entry_of_slot,
                                const int32_t* dest, int k, T* x_perm) {
  const int64_t slot = blockIdx.x;
  const int64_t row = entry_of_slot[slot] / k;
  const int64_t to = dest != nullptr ? dest[slot] : slot;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    x_perm[to * hidden + i] = x[row * hidden + i];
  }
}

template <typename T>
__global__ void MoeCombineKernel(const T* y_perm, int hidden, const int32_t* slot_of_entry,
                                 const int32_t* dest, const float* weights, int k, T* out) {
  const int64_t row = blockIdx.x;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int64_t slot = slot_of_entry[row * k + j];
      const int64_t from = dest != nullptr ? dest[slot] : slot;
      acc = fmaf(weights[row * k + j], Load(y_perm + from * hidden + i), acc);
    }
    Store(out + row * hidden + i, acc);
  }
}

// The first expert of `rank` (ExpertsOfRank, runtime/engine/model/weight_plan.h).
__device__ __forceinline__ int FirstExpert(int num_experts, int rank, int world) {
  return static_cast<int>(static_cast<int64_t>(rank) * num_experts / world);
}

// One thread per slot: its expert (by the offsets), that expert's rank, and where the
// slot goes in the rank-major capacity layout; block 0 also writes the counts.
__global__ void MoeDispatchLayoutKernel(const int32_t* offsets, int num_experts, int world,
                                        int capacity, int max_local, int entries, int32_t* dest,
                                        int32_t* counts) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (blockIdx.x == 0) {
    for (int idx = threadIdx.x; idx < world * max_local; idx += blockDim.x) {
      const int p = idx / max_local;
      const int e = FirstExpert(num_experts, p, world) + idx % max_local;
      counts[idx] = e < FirstExpert(num_experts, p + 1, world) ? offsets[e + 1] - offsets[e] : 0;
    }
  }
  if (s >= entries) return;
  int lo = 0, hi = num_experts;  // the expert e with offsets[e] <= s < offsets[e + 1]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (offsets[mid] <= s) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  int p = 0;
  while (p + 1 < world && lo >= FirstExpert(num_experts, p + 1, world)) ++p;
  dest[s] = p * capacity + (s - offsets[FirstExpert(num_experts, p, world)]);
}

template <typename T>
cudaError_t Gather(const T* x, int hidden, const int32_t* entry_of_slot, const int32_t* dest,
                   int entries, int k, T* out, cudaStream_t stream) {
  if (entries <= 0 || hidden <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(MoeGatherKernel<T>, entries, kThreads, 0, stream)
  (x, hidden, entry_of_slot, dest, k, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Combine(const T* y_perm, int hidden, const int32_t* slot_of_entry, const int32_t* dest,
                    const float* weights, int rows, int k, T* out, cudaStream_t stream) {
  if (rows <= 0 || hidden <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(MoeCombineKernel<T>, rows, kThreads, 0, stream)
  (y_perm, hidden, slot_of_entry, dest, weights, k, out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchMoeRoute(const float* logits, int rows, int num_experts, int k, bool renormalize,
                           int32_t* experts, float* weights, cudaStream_t stream) {
  if (num_experts < 1 || num_experts > kMaxMoeExperts || k < 1 || k > kMaxMoeTopK ||
      k > num_experts) {
    return cudaErrorInvalidValue;
  }
  if (rows <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(MoeRouteKernel, (rows + kRouteWarps - 1) / kRouteWarps, kRouteWarps * 32, 0,
                  stream)
  (logits, rows, num_experts, k, renormalize, experts, weights);
  return cudaGetLastError();
}

cudaError_t LaunchMoePermute(const int32_t* experts, int entries, int num_experts, int32_t* offsets,
                             int32_t* entry_of_slot, int32_t* slot_of_entry, cudaStream_t stream) {
  if (num_experts < 1 || num_experts > kMaxMoeExperts || entries < 0) return cudaErrorInvalidValue;
  LOCKSTEP_LAUNCH(MoePermuteKernel, 1, kPermuteThreads, 0, stream)
  (experts, entries, num_experts, offsets, entry_of_slot, slot_of_entry);
  return cudaGetLastError();
}

cudaError_t LaunchMoeGather(const Bf16* x, int hidden, const int32_t* entry_of_slot, int entries,
                            int k, Bf16* x_perm, cudaStream_t stream) {
  return Gather(x, hidden, entry_of_slot, nullptr, entries, k, x_perm, stream);
}
cudaError_t LaunchMoeGather(const float* x, int hidden, const int32_t* entry_of_slot, int entries,
                            int k, float* x_perm, cudaStream_t stream) {
  return Gather(x, hidden, entry_of_slot, nullptr, entries, k, x_perm, stream);
}

cudaError_t LaunchMoeScatter(const Bf16* x, int hidden, const int32_t* entry_of_slot,
                             const int32_t* dest, int entries, int k, Bf16* out,
                             cudaStream_t stream) {
  return Gather(x, hidden, entry_of_slot, dest, entries, k, out, stream);
}
cudaError_t LaunchMoeScatter(const float* x, int hidden, const int32_t* entry_of_slot,
                             const int32_t* dest, int entries, int k, float* out,
                             cudaStream_t stream) {
  return Gather(x, hidden, entry_of_slot, dest, entries, k, out, stream);
}

cudaError_t LaunchMoeCombine(const Bf16* y_perm, int hidden, const int32_t* slot_of_entry,
                             const float* weights, int rows, int k, Bf16* out,
                             cudaStream_t stream) {
  return Combine(y_perm, hidden, slot_of_entry, nullptr, weights, rows, k, out, stream);
}

cudaError_t LaunchMoeCombineFrom(const Bf16* y, int hidden, const int32_t* slot_of_entry,
                                 const int32_t* dest, const float* weights, int rows, int k,
                                 Bf16* out, cudaStream_t stream) {
  return Combine(y, hidden, slot_of_entry, dest, weights, rows, k, out, stream);
}
cudaError_t LaunchMoeCombineFrom(const float* y, int hidden, const int32_t* slot_of_entry,
                                 const int32_t* dest, const float* weights, int rows, int k,
                                 float* out, cudaStream_t stream) {
  return Combine(y, hidden, slot_of_entry, dest, weights, rows, k, out, stream);
}

cudaError_t LaunchMoeDispatchLayout(const int32_t* offsets, int num_experts, int world,
                                    int capacity, int max_local, int entries, int32_t* dest,
                                    int32_t* counts, cudaStream_t stream) {
  if (num_experts < 1 || world < 1 || world > num_experts || max_local < 1 || entries < 0 ||
      capacity < 0) {
    return cudaErrorInvalidValue;
  }
  const int blocks = entries > 0 ? (entries + kThreads - 1) / kThreads : 1;
  LOCKSTEP_LAUNCH(MoeDispatchLayoutKernel, blocks, kThreads, 0, stream)
  (offsets, num_experts, world, capacity, max_local, entries, dest, counts);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda::kernels
