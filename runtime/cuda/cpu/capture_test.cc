// Stream capture rules: what CUDA forbids while a stream captures fails with its
// capture error and invalidates the capture (cudaStreamEndCapture then returns
// cudaErrorStreamCaptureInvalidated and no graph); what it allows does not.
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/stream_ops.h"
#include "runtime/cuda/cpu/stream_test_util.h"

namespace lockstep::cuda_cpu {
namespace {

// Ends the capture on `stream`; returns its result (destroying any graph).
cudaError_t EndCapture(cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  return ended;
}

TEST(CaptureTest, CapturedWorkDoesNotRun) {
  ScopedStream stream;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_TRUE(IsCapturing(stream));
  bool ran = false;
  ASSERT_EQ(Enqueue(stream, "op",
                    [&] {
                      ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_EQ(EndCapture(stream), cudaSuccess);
  EXPECT_FALSE(IsCapturing(stream));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_FALSE(ran);
}

TEST(CaptureTest, SynchronizingTheCapturingStreamInvalidatesIt) {
  ScopedStream stream;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorStreamCaptureUnsupported);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(Enqueue(stream, "op", [] { return cudaSuccess; }), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(EndCapture(stream), cudaErrorStreamCaptureInvalidated);
  // The stream works again after the capture ended.
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

TEST(CaptureTest, QueryingACapturedEventIsRefused) {
  ScopedStream stream;
  cudaEvent_t event;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorCapturedEvent);
  EXPECT_EQ(cudaEventSynchronize(event), cudaErrorCapturedEvent);
  EXPECT_EQ(EndCapture(stream), cudaSuccess);
  cudaEventDestroy(event);
}

TEST(CaptureTest, SynchronousCopyInvalidatesAGlobalCapture) {
  ScopedStream stream;
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  char host[64] = {};
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host, 64, cudaMemcpyHostToDevice),
            cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(EndCapture(stream), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

TEST(CaptureTest, RelaxedCaptureAllowsAllocation) {
  ScopedStream stream;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  void* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  EXPECT_EQ(EndCapture(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

TEST(CaptureTest, GlobalCaptureForbidsOtherThreadsUnsafeCalls) {
  for (cudaStreamCaptureMode mode :
       {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    SCOPED_TRACE(mode);
    ScopedStream stream;
    ASSERT_EQ(cudaStreamBeginCapture(stream, mode), cudaSuccess);
    cudaError_t other = cudaSuccess;
    void* device = nullptr;
    std::thread([&] { other = cudaMalloc(&device, 64); }).join();
    const bool global = mode == cudaStreamCaptureModeGlobal;
    EXPECT_EQ(other, global ? cudaErrorStreamCaptureUnsupported : cudaSuccess);
    EXPECT_EQ(EndCapture(stream), global ? cudaErrorStreamCaptureInvalidated : cudaSuccess);
    if (device != nullptr) EXPECT_EQ(cudaFree(device), cudaSuccess);
  }
}

TEST(CaptureTest, LegacyStreamWorkWhileABlockingStreamCapturesIsImplicit) {
  ScopedStream blocking(cudaStreamDefault);
  ASSERT_EQ(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(Enqueue(nullptr, "legacy op", [] { return cudaSuccess; }),
            cudaErrorStreamCaptureImplicit);
  EXPECT_EQ(EndCapture(blocking), cudaErrorStreamCaptureInvalidated);
  // A non-blocking stream's capture does not involve the legacy stream.
  ScopedStream non_blocking;
  ASSERT_EQ(cudaStreamBeginCapture(non_blocking, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(Enqueue(nullptr, "legacy op", [] { return cudaSuccess; }), cudaSuccess);
  EXPECT_EQ(EndCapture(non_blocking), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(CaptureTest, DeviceSynchronizeDuringCaptureInvalidatesIt) {
  ScopedStream stream;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(EndCapture(stream), cudaErrorStreamCaptureInvalidated);
}

TEST(CaptureTest, ThreadLocalCaptureEndsOnlyOnItsThread) {
  ScopedStream stream;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaError_t other = cudaSuccess;
  std::thread([&] {
    cudaGraph_t graph = nullptr;
    other = cudaStreamEndCapture(stream, &graph);
  }).join();
  EXPECT_EQ(other, cudaErrorStreamCaptureWrongThread);
  EXPECT_EQ(EndCapture(stream), cudaSuccess);
}

TEST(CaptureTest, AStreamThatWaitsForACapturedEventJoinsTheCapture) {
  ScopedStream origin, forked;
  cudaEvent_t fork, join;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
  std::vector<int> log;
  const auto append = [&log](int i) {
    return [&log, i] {
      log.push_back(i);
      return cudaSuccess;
    };
  };
  ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(Enqueue(origin, "one", append(1)), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(forked, fork, 0), cudaSuccess);
  EXPECT_TRUE(IsCapturing(forked));
  ASSERT_EQ(Enqueue(forked, "two", append(2)), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(join, forked), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(origin, join, 0), cudaSuccess);
  ASSERT_EQ(Enqueue(origin, "three", append(3)), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(forked, nullptr), cudaErrorInvalidValue);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(forked, &graph), cudaErrorStreamCaptureUnmatched);
  ASSERT_EQ(cudaStreamEndCapture(origin, &graph), cudaSuccess);
  EXPECT_FALSE(IsCapturing(forked));
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, origin), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(origin), cudaSuccess);
  EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
  cudaGetLastError();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
}

TEST(CaptureTest, EndingWithoutACaptureIsAnIllegalState) {
  ScopedStream stream;
  EXPECT_EQ(EndCapture(stream), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeRelaxed),
            cudaErrorStreamCaptureUnsupported);
  cudaGetLastError();
}

}  // namespace
}  // namespace lockstep::cuda_cpu
