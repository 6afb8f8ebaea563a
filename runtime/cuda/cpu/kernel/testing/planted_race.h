// A kernel with a planted shared-memory race, built by cuda_library like every kernel
// of the tree, for racecheck_config_test (--config=cuda_cpu_racecheck): 64 threads
// store their element into a static __shared__ tile and read their right neighbour's
// with no __syncthreads between.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_TESTING_PLANTED_RACE_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_TESTING_PLANTED_RACE_H_

#include <cuda_runtime_api.h>

namespace lockstep::cuda_cpu::testing {

inline constexpr int kPlantedRaceThreads = 64;

// out[t] = in[t + 1] (0 for the last thread), racily; returns the launch's error.
cudaError_t LaunchPlantedRace(const int* in, int* out, cudaStream_t stream);

}  // namespace lockstep::cuda_cpu::testing

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_TESTING_PLANTED_RACE_H_
