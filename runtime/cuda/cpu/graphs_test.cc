// Graphs: every launch of an instantiated graph runs the captured ops again, in
// order, reading memory when they run; a launch is ordered in its stream.
#include <vector>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/cpu/stream_ops.h"
#include "runtime/cuda/cpu/stream_test_util.h"

namespace lockstep::cuda_cpu {
namespace {

TEST(GraphsTest, ReplayRerunsTheCapturedOpsInOrder) {
  ScopedStream stream;
  std::vector<int> log;
  int input = 0;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "first",
                    [&] {
                      log.push_back(input);
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "second",
                    [&] {
                      log.push_back(-input);
                      return cudaSuccess;
                    }),
            cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_TRUE(log.empty());
  for (int i = 1; i <= 3; ++i) {
    input = i;  // read when the graph runs, not when it was captured
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  EXPECT_EQ(log, (std::vector<int>{1, -1, 2, -2, 3, -3}));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
}

TEST(GraphsTest, CapturedCopiesReadTheirSourceAtEachLaunch) {
  ScopedStream stream;
  int* pinned = nullptr;
  int* device = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 2 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&device, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device, pinned, sizeof(int), cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned + 1, device, sizeof(int), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i : {7, 11}) {
    pinned[0] = i;
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(pinned[1], i);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(device);
  cudaFreeHost(pinned);
}

TEST(GraphsTest, AFailingNodeStopsTheGraphAndIsSticky) {
  ASSERT_EQ(cudaSetDevice(6), cudaSuccess);
  {
    ScopedStream stream;
    bool third_ran = false;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
    ASSERT_EQ(Enqueue(stream, "ok", [] { return cudaSuccess; }), cudaSuccess);
    ASSERT_EQ(Enqueue(stream, "faults", [] { return cudaErrorIllegalAddress; }), cudaSuccess);
    ASSERT_EQ(Enqueue(stream, "third",
                      [&] {
                        third_ran = true;
                        return cudaSuccess;
                      }),
              cudaSuccess);
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorIllegalAddress);
    EXPECT_FALSE(third_ran);
    EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaErrorIllegalAddress);
  }
  testing::ClearStickyErrors();
  cudaGetLastError();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

}  // namespace
}  // namespace lockstep::cuda_cpu
