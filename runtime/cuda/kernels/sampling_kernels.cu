#include "runtime/cuda/kernels/sampling_kernels.h"

#include <cuda_runtime.h>

#include <cmath>

#include "common/splitmix64.h"
#include "runtime/cuda/kernels/launch.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kThreads = 256;

// (logit, id) ordered as the CPU sampler orders candidates: higher logit first, then
// lower id.
struct Candidate {
  float logit;
  int32_t id;
};

__device__ __forceinline__ bool Before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The first candidate of the CTA (every thread gets it); `scratch` holds 32 entries.
__device__ Candidate BlockFirst(Candidate c, Candidate* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const Candidate other{__shfl_xor_sync(0xffffffffu, c.logit, offset),
                          __shfl_xor_sync(0xffffffffu, c.id, offset)};
    if (Before(other, c)) c = other;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = c;
  __syncthreads();
  c = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
    if (Before(scratch[w], c)) c = scratch[w];
  }
  return c;
}

constexpr Candidate kNone{-INFINITY, 0x7fffffff};

// The first candidate strictly after `prev` in candidate order (prev.id < 0: the first).
__device__ Candidate NextCandidate(const float* row, int vocab, Candidate prev,
                                   Candidate* scratch) {
  Candidate best = kNone;
  for (int t = threadIdx.x; t < vocab; t += blockDim.x) {
    const Candidate c{row[t], t};
    if ((prev.id < 0 || Before(prev, c)) && (best.id == kNone.id || Before(c, best))) best = c;
  }
  return BlockFirst(best, scratch);
}

__global__ void ArgMaxKernel(const float* logits, int vocab, int32_t* tokens) {
  __shared__ Candidate scratch[32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const Candidate best = NextCandidate(row, vocab, Candidate{0.0f, -1}, scratch);
  if (threadIdx.x == 0) tokens[blockIdx.x] = best.id;
}

__global__ void SampleKernel(const float* logits, int vocab, const SampleRowParams* params,
                             int32_t* tokens) {
  __shared__ Candidate scratch[32];
  __shared__ Candidate chosen[kMaxDeviceTopK];
  const SampleRowParams p = params[blockIdx.x];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const bool greedy = p.temperature == 0.0f;
  // SampleToken's candidate count: top_k when it truncates, else the whole vocabulary.
  const int count = greedy ? 1 : (p.top_k > 0 && p.top_k < vocab ? p.top_k : vocab);
  if (count > kMaxDeviceTopK) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = -1;
    return;
  }
  Candidate prev{0.0f, -1};
  for (int i = 0; i < count; ++i) {
    prev = NextCandidate(row, vocab, prev, scratch);
    if (threadIdx.x == 0) chosen[i] = prev;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (greedy) {
    tokens[blockIdx.x] = chosen[0].id;
    return;
  }
  // The sampler's arithmetic, in double. Its candidates are in logit order when top-k or
  // top-p truncates, else in id order.
  const double max_logit = chosen[0].logit;
  const bool truncate = (p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.0f;
  if (!truncate) {
    for (int a = 1; a < count; ++a) {
      for (int b = a; b > 0 && chosen[b - 1].id > chosen[b].id; --b) {
        const Candidate c = chosen[b - 1];
        chosen[b - 1] = chosen[b];
        chosen[b] = c;
      }
    }
  }
  const double inv_temperature = 1.0 / static_cast<double>(p.temperature);
  double probs[kMaxDeviceTopK];
  double total = 0.0;
  for (int i = 0; i < count; ++i) {
    probs[i] = exp((static_cast<double>(chosen[i].logit) - max_logit) * inv_temperature);
    total += probs[i];
  }
  int keep = count;
  if (p.top_p < 1.0f) {
    double kept = 0.0;
    keep = 0;
    while (keep < count) {
      kept += probs[keep++];
      if (kept >= static_cast<double>(p.top_p) * total) break;
    }
    total = kept;
  }
  const double u = CounterUniform01(p.seed, p.position, kTokenDrawPurpose) * total;
  double cumulative = 0.0;
  int32_t token = chosen[keep - 1].id;
  for (int i = 0; i < keep; ++i) {
    cumulative += probs[i];
    if (u < cumulative) {
      token = chosen[i].id;
      break;
    }
  }
  tokens[blockIdx.x] = token;
}

}  // namespace

cudaError_t LaunchArgMax(const float* logits, int rows, int vocab, int32_t* tokens,
                         cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(ArgMaxKernel, rows, kThreads, 0, stream)(logits, vocab, tokens);
  return cudaGetLastError();
}

cudaError_t LaunchSampleTopKTopP(const float* logits, int rows, int vocab,
                                 const SampleRowParams* params, int32_t* tokens,
                                 cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  LOCKSTEP_LAUNCH(SampleKernel, rows, kThreads, 0, stream)(logits, vocab, params, tokens);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda::kernels
