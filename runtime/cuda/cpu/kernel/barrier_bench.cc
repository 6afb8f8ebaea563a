// What the block executor costs: a __syncthreads of 128 and 256 threads, a full-warp
// shuffle, and a thread of a kernel without sync ops (the cheap path). Prints ns per
// operation, from the difference of a long and a short run (so the launch, the stream's
// wake-up and the synchronization drop out); `bazel run //runtime/cuda/cpu:barrier_bench`.
#include <chrono>
#include <cstdio>

#include <cuda_runtime.h>

#include "runtime/cuda/cpu/kernel/prelude.h"

namespace {

__global__ void Barriers(int rounds, int* sink) {
  int x = 0;
  for (int i = 0; i < rounds; ++i) {
    x += i;
    __syncthreads();
  }
  if (threadIdx.x == 0) sink[0] = x;
}

__global__ void Shuffles(int rounds, int* sink) {
  int x = threadIdx.x;
  for (int i = 0; i < rounds; ++i) x += __shfl_xor_sync(0xffffffffu, x, 1);
  if (threadIdx.x == 0) sink[0] = x;
}

__global__ void Plain(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

template <typename F>
double Seconds(F run, cudaStream_t stream) {
  const auto start = std::chrono::steady_clock::now();
  run();
  if (cudaStreamSynchronize(stream) != cudaSuccess) std::printf("launch failed\n");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() {
  using lockstep::cuda_cpu::Launch;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  int sink = 0;
  constexpr int kShort = 1000;
  constexpr int kLong = 11000;
  for (int threads : {128, 256}) {
    const auto run = [&](int rounds) {
      return Seconds([&] { Launch(Barriers, "Barriers", 1, threads, 0, stream)(rounds, &sink); },
                     stream);
    };
    const double s = (run(kLong) - run(kShort)) / (kLong - kShort);
    std::printf("__syncthreads, %d threads: %.2f us per barrier (%.1f ns per thread)\n", threads,
                s * 1e6, s / threads * 1e9);
  }
  const auto shuffles = [&](int rounds) {
    return Seconds([&] { Launch(Shuffles, "Shuffles", 1, 32, 0, stream)(rounds, &sink); }, stream);
  };
  const double shuffle = (shuffles(kLong) - shuffles(kShort)) / (kLong - kShort);
  std::printf("__shfl_xor_sync, 32 lanes: %.2f us per shuffle\n", shuffle * 1e6);
  static float out[1000 * 256];
  const double plain = Seconds([&] { Launch(Plain, "Plain", 1000, 256, 0, stream)(out); }, stream);
  std::printf("a thread without sync ops: %.1f ns\n", plain / (1000 * 256) * 1e9);
  cudaStreamDestroy(stream);
  return 0;
}
