#include "runtime/cuda/cpu/kernel/testing/planted_race.h"

#include "runtime/cuda/kernels/launch.h"

namespace lockstep::cuda_cpu::testing {
namespace {

__global__ void ShiftLeftRacily(const int* in, int* out) {
  __shared__ int tile[kPlantedRaceThreads];
  const int t = threadIdx.x;
  tile[t] = in[t];
  // Planted: the __syncthreads() that belongs here is missing.
  out[t] = t + 1 < kPlantedRaceThreads ? tile[t + 1] : 0;
}

}  // namespace

cudaError_t LaunchPlantedRace(const int* in, int* out, cudaStream_t stream) {
  LOCKSTEP_LAUNCH(ShiftLeftRacily, dim3(1), dim3(kPlantedRaceThreads), 0, stream)(in, out);
  return cudaGetLastError();
}

}  // namespace lockstep::cuda_cpu::testing
