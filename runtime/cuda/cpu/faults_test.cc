// Fault injection: each fault fires at its nth matching event and only then.
#include <stdlib.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/cpu/stream_ops.h"
#include "runtime/cuda/cpu/stream_test_util.h"

namespace lockstep::cuda_cpu {
namespace {

class FaultsTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::ClearFaults(); }
  void TearDown() override {
    testing::ClearFaults();
    testing::ClearStickyErrors();
    cudaGetLastError();
    cudaSetDevice(0);
  }
};

TEST_F(FaultsTest, TheNthAllocationFails) {
  testing::InjectFault(testing::Fault::kAllocationFails, 2);
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 16), cudaSuccess);
  EXPECT_EQ(cudaMallocAsync(&b, 16, nullptr), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaMalloc(&c, 16), cudaSuccess);  // once only, and not sticky
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(c), cudaSuccess);
}

TEST_F(FaultsTest, TheNthMatchingOpFaultsWithAnIllegalAddress) {
  ASSERT_EQ(cudaSetDevice(7), cudaSuccess);
  testing::InjectFault(testing::Fault::kOpIllegalAddress, 2, "Rope");
  ScopedStream stream;
  int ran = 0;
  const auto count = [&] {
    ++ran;
    return cudaSuccess;
  };
  Gate gate;  // every op is enqueued before the first runs
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "kernel RmsNorm", count), cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "kernel Rope", count), cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "kernel RmsNorm", count), cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "kernel Rope", count), cudaSuccess);  // the 2nd Rope: faults
  ASSERT_EQ(Enqueue(stream, "kernel RmsNorm", count), cudaSuccess);
  gate.Open();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorIllegalAddress);
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
}

TEST_F(FaultsTest, AHungOpHoldsItsStreamUntilDestroyed) {
  testing::InjectFault(testing::Fault::kOpHangs, 1, "Hangs");
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  bool hung_op_ran = false, later_ran = false;
  ASSERT_EQ(Enqueue(stream, "kernel Hangs",
                    [&] {
                      hung_op_ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "kernel Later",
                    [&] {
                      later_ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, stream), cudaSuccess);
  // Other streams still work, and the device drains around the hung one.
  ScopedStream other;
  ASSERT_EQ(Enqueue(other, "kernel Other", [] { return cudaSuccess; }), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(done), cudaSuccess);  // released, its work dropped
  EXPECT_FALSE(hung_op_ran);
  EXPECT_FALSE(later_ran);
  cudaEventDestroy(done);
}

TEST_F(FaultsTest, TheNthGraphLaunchFails) {
  ScopedStream stream;
  int ran = 0;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "kernel Step",
                    [&] {
                      ++ran;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  testing::InjectFault(testing::Fault::kGraphLaunchFails, 2);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);  // not sticky
  EXPECT_EQ(ran, 2);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(FaultsEnvTest, TheEnvironmentArmsFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("LOCKSTEP_CUDA_CPU_FAULTS", "alloc:2", 1);
        void* a = nullptr;
        void* b = nullptr;
        const bool first = cudaMalloc(&a, 16) == cudaSuccess;
        const bool second = cudaMalloc(&b, 16) == cudaErrorMemoryAllocation;
        _exit(first && second ? 3 : 4);
      },
      ::testing::ExitedWithCode(3), "");
  EXPECT_DEATH(
      {
        setenv("LOCKSTEP_CUDA_CPU_FAULTS", "alloc:2,explode:1", 1);
        void* a = nullptr;
        cudaMalloc(&a, 16);
      },
      "LOCKSTEP_CUDA_CPU_FAULTS: 'explode:1': KIND is");
}

}  // namespace
}  // namespace lockstep::cuda_cpu
