// Events: a query says cudaErrorNotReady until the stream reaches the record, and a
// stream that does not wait for another's event reads what that stream has not yet
// written (the bug a missing cudaStreamWaitEvent is).
#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/stream_ops.h"
#include "runtime/cuda/cpu/stream_test_util.h"

namespace lockstep::cuda_cpu {
namespace {

TEST(EventsTest, QueryIsNotReadyUntilTheStreamReachesTheRecord) {
  ScopedStream stream;
  cudaEvent_t event;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);  // never recorded
  Gate gate;
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not ready is not an error
  gate.Open();
  EXPECT_EQ(cudaEventSynchronize(event), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaErrorInvalidResourceHandle);
}

TEST(EventsTest, ElapsedTimeNeedsTimingAndBothRecordsReached) {
  ScopedStream stream;
  cudaEvent_t start, end, untimed;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&untimed, cudaEventDisableTiming), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, stream), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(start), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  for (cudaEvent_t e : {start, end, untimed}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
}

// Stream `producer` writes 1 once the gate opens; stream `consumer` reads the value.
// Returns what the consumer read.
int ConsumerReads(bool wait_for_event) {
  ScopedStream producer, consumer;
  cudaEvent_t written;
  EXPECT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), cudaSuccess);
  int value = 0;
  int read = -1;
  Gate gate;
  EXPECT_EQ(gate.Hold(producer), cudaSuccess);
  EXPECT_EQ(Enqueue(producer, "write",
                    [&] {
                      value = 1;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaEventRecord(written, producer), cudaSuccess);
  if (wait_for_event) EXPECT_EQ(cudaStreamWaitEvent(consumer, written, 0), cudaSuccess);
  EXPECT_EQ(Enqueue(consumer, "read",
                    [&] {
                      read = value;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  cudaEvent_t consumed;
  EXPECT_EQ(cudaEventCreateWithFlags(&consumed, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(consumed, consumer), cudaSuccess);
  // Without the wait the consumer finishes while the producer is still held.
  if (!wait_for_event) EXPECT_EQ(cudaEventSynchronize(consumed), cudaSuccess);
  if (wait_for_event) EXPECT_EQ(cudaEventQuery(consumed), cudaErrorNotReady);
  gate.Open();
  EXPECT_EQ(cudaStreamSynchronize(producer), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  cudaEventDestroy(written);
  cudaEventDestroy(consumed);
  return read;
}

TEST(EventsTest, StreamWaitEventOrdersTwoStreams) { EXPECT_EQ(ConsumerReads(true), 1); }

TEST(EventsTest, AMissingWaitIsVisible) { EXPECT_EQ(ConsumerReads(false), 0); }

}  // namespace
}  // namespace lockstep::cuda_cpu
