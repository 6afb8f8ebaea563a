// Streams: work runs in enqueue order on each stream, the host waits for it with
// cudaStreamSynchronize, and a stream that waits for nothing can run ahead of another.
#include <atomic>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/stream_ops.h"
#include "runtime/cuda/cpu/stream_test_util.h"

namespace lockstep::cuda_cpu {
namespace {

TEST(StreamsTest, RunsWorkInEnqueueOrder) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<int> order;  // written only by the stream's worker, read after the sync
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(Enqueue(stream, "append",
                      [&order, i] {
                        order.push_back(i);
                        return cudaSuccess;
                      }),
              cudaSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(StreamsTest, UnknownStreamIsAnInvalidHandle) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(Enqueue(stream, "late", [] { return cudaSuccess; }), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaErrorInvalidResourceHandle);
}

TEST(StreamsTest, StreamsRunIndependently) {
  // Stream a's op waits for stream b's op: it can only finish because b runs on
  // its own worker meanwhile.
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  std::atomic<bool> b_ran{false};
  ASSERT_EQ(Enqueue(a, "wait for b",
                    [&] {
                      while (!b_ran.load()) {
                      }
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(Enqueue(b, "b",
                    [&] {
                      b_ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
}

TEST(StreamsTest, LegacyStreamWaitsForBlockingStreams) {
  cudaStream_t blocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  Gate gate;
  std::atomic<int> step{0};
  ASSERT_EQ(gate.Hold(blocking), cudaSuccess);
  ASSERT_EQ(Enqueue(blocking, "step",
                    [&] {
                      step = 1;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  int seen = -1;
  ASSERT_EQ(Enqueue(nullptr, "after",
                    [&] {
                      seen = step.load();
                      return cudaSuccess;
                    }),
            cudaSuccess);
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
}

TEST(StreamsTest, DeviceSynchronizeWaitsForADestroyedStreamsWork) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  std::atomic<bool> ran{false};
  ASSERT_EQ(Enqueue(stream, "after the gate",
                    [&] {
                      ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);  // its work still runs
  std::thread opener([&] { gate.Open(); });
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(ran);
  opener.join();
}

TEST(StreamsTest, HostFunctionRunsInOrder) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::vector<int> order;
  ASSERT_EQ(Enqueue(stream, "first",
                    [&] {
                      order.push_back(1);
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(
                stream, [](void* p) { static_cast<std::vector<int>*>(p)->push_back(2); }, &order),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace lockstep::cuda_cpu
