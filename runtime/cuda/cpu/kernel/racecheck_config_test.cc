// --config=cuda_cpu_racecheck instruments the kernels cuda_library builds (bazel/cuda.bzl
// adds the race checker's load/store callbacks to the generated kernel files) and turns
// the check on (LOCKSTEP_CUDA_CPU_RACECHECK=1): the planted race of testing/planted_race.cu,
// a kernel built like the tree's, is a fault naming both threads and the address.
// Built only under that configuration.
#include <cuda_runtime.h>

#include <iostream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cpu/kernel/block_executor.h"
#include "runtime/cuda/cpu/kernel/racecheck.h"
#include "runtime/cuda/cpu/kernel/testing/planted_race.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

using ::testing::HasSubstr;

TEST(RaceCheckConfigTest, ThePlantedRaceInACudaLibraryKernelIsReported) {
  ASSERT_TRUE(RaceCheckEnabled()) << "LOCKSTEP_CUDA_CPU_RACECHECK=1 is not set";
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  int* in = nullptr;
  int* out = nullptr;
  ASSERT_EQ(cudaMalloc(&in, testing::kPlantedRaceThreads * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, testing::kPlantedRaceThreads * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(in, 0, testing::kPlantedRaceThreads * sizeof(int)), cudaSuccess);
  ASSERT_EQ(testing::LaunchPlantedRace(in, out, stream), cudaSuccess);
  EXPECT_NE(cudaStreamSynchronize(stream), cudaSuccess);
  const std::string fault = LastKernelFault();
  std::cout << fault << "\n";
  EXPECT_THAT(fault, HasSubstr("kernel ShiftLeftRacily"));
  EXPECT_THAT(fault, HasSubstr("race"));
}

}  // namespace
}  // namespace lockstep::cuda_cpu::kernel
