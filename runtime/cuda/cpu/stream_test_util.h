// Test helpers for the runtime's self-tests: a gate that holds a stream until the
// test opens it (no sleeps, no timing), and a stream that is destroyed at scope end.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_STREAM_TEST_UTIL_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_STREAM_TEST_UTIL_H_

#include <future>
#include <memory>

#include <cuda_runtime.h>

#include "runtime/cuda/cpu/stream_ops.h"

namespace lockstep::cuda_cpu {

// Puts an op on a stream that waits until Open() (or the gate's destruction).
class Gate {
 public:
  Gate() : opened_(promise_.get_future().share()) {}
  ~Gate() { Open(); }
  cudaError_t Hold(cudaStream_t stream) {
    return Enqueue(stream, "gate", [f = opened_] {
      f.wait();
      return cudaSuccess;
    });
  }
  void Open() {
    if (!open_) promise_.set_value();
    open_ = true;
  }

 private:
  std::promise<void> promise_;
  std::shared_future<void> opened_;
  bool open_ = false;
};

// A stream made with `flags`, destroyed at scope end.
class ScopedStream {
 public:
  explicit ScopedStream(unsigned flags = cudaStreamNonBlocking) {
    ok_ = cudaStreamCreateWithFlags(&stream_, flags) == cudaSuccess;
  }
  ~ScopedStream() {
    if (ok_) cudaStreamDestroy(stream_);
  }
  bool ok() const { return ok_; }
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  bool ok_ = false;
};

}  // namespace lockstep::cuda_cpu

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_STREAM_TEST_UTIL_H_
