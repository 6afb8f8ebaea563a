// The CPU execution layer's runtime state shared by its parts (streams, events,
// copies, graphs, memory): stream objects with their FIFO of work and worker thread,
// completion markers, captures, and the per-thread and per-device error state.
// Internal to `:cudart`; the rest of the layer uses stream_ops.h.
//
// Thread safety: stream, event, capture and marker state is guarded by Mu(); the
// functions named *Locked must be called with it held. Everything else takes its
// own locks.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_RUNTIME_STATE_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_RUNTIME_STATE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver_types.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace lockstep::cuda_cpu::internal {

using Clock = std::chrono::steady_clock;

// Set once the work it marks has run (or was skipped after a sticky error).
struct Marker {
  bool done = false;
  Clock::time_point at;
};
using MarkerPtr = std::shared_ptr<Marker>;

// One recorded operation of a capture or graph.
struct Node {
  std::string name;
  StreamOp op;
};

// A stream capture in progress (shared by the streams that joined it).
struct Capture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  unsigned long long id = 0;
  CUstream_st* origin = nullptr;
  std::vector<Node> nodes;
  cudaError_t invalidated = cudaSuccess;  // the error that invalidated it
};

// One unit of work in a stream's FIFO.
struct Item {
  std::string name;
  StreamOp op;
  std::vector<MarkerPtr> after;  // runs once these are done
  MarkerPtr done;
};

std::mutex& Mu();
std::condition_variable& Cv();  // notified whenever a marker completes or work arrives

}  // namespace lockstep::cuda_cpu::internal

// A stream: its FIFO, run in order by its own worker thread (detached; it deletes the
// stream once the stream is destroyed and its work has drained).
struct CUstream_st {
  int device = 0;
  unsigned flags = 0;
  bool legacy = false;
  std::deque<lockstep::cuda_cpu::internal::Item> queue;
  lockstep::cuda_cpu::internal::MarkerPtr last;  // of the last item enqueued
  bool destroyed = false;
  bool hung = false;  // an injected hang holds its worker
  std::shared_ptr<lockstep::cuda_cpu::internal::Capture> capture;
};

namespace lockstep::cuda_cpu::internal {

// The stream `handle` names (nullptr, cudaStreamLegacy and cudaStreamPerThread: the
// current device's legacy default stream), or cudaErrorInvalidResourceHandle.
cudaError_t ResolveLocked(cudaStream_t handle, CUstream_st** out);

// Every live stream (legacy ones included).
const std::vector<CUstream_st*>& StreamsLocked();

// Puts `op` on `s` after its earlier work and `after` (or into its capture). Applies
// the legacy stream's implicit synchronisation and the capture rules. `done`, when
// not null, receives the item's marker (null for a captured op).
cudaError_t SubmitLocked(CUstream_st* s, std::string name, StreamOp op,
                         std::vector<MarkerPtr> after = {}, MarkerPtr* done = nullptr);

// Waits (no deadline, as CUDA) until `marker` is done.
void WaitLocked(std::unique_lock<std::mutex>& lock, const MarkerPtr& marker);

// How long a query of unfinished work (cudaEventQuery, cudaStreamQuery) waits for it
// before it answers cudaErrorNotReady. Callers poll a query in a loop that spins, then
// yields (runtime/cuda/poll.h); on the host that loop would take the CPU, and Mu(), from
// the stream workers doing the work. So a query blocks instead and returns as soon as
// the work is done (Cv() wakes it), or after this bound: the caller's own deadline and
// abort checks still run between queries.
inline constexpr std::chrono::milliseconds kQueryWait{2};

// Waits until `marker` is done, at most kQueryWait; whether it is done.
bool QueryWaitLocked(std::unique_lock<std::mutex>& lock, const MarkerPtr& marker);

// Marks `capture` invalidated by `error` (the first error stays).
void InvalidateLocked(Capture& capture, cudaError_t error);

// For a call CUDA deems unsafe during capture (synchronous copies and fills,
// allocation, device synchronisation): the captures it would break (this thread's
// non-relaxed one, another thread's global one) are invalidated and the call gets
// cudaErrorStreamCaptureUnsupported; else cudaSuccess.
cudaError_t CheckUnsafeCallLocked();

// Waits for all work enqueued so far on the streams of `device` (every device when
// negative), except streams held by an injected hang.
void DrainLocked(std::unique_lock<std::mutex>& lock, int device);

// Called inside a stream op by an injected hang: blocks until the stream running it
// is destroyed.
void HangUntilStreamDestroyed();

// Errors. The sticky error of `device` (cudaSuccess when none).
cudaError_t StickyError(int device);
// Records `error` as the calling thread's last error when it is one; returns it.
cudaError_t Ret(cudaError_t error);
// The current device's sticky error, recorded as the last error (the check every call
// starts with).
cudaError_t CheckSticky();
void SetStickyErrorOn(int device, cudaError_t error, const std::string& message);
void ClearStickyErrors();

// Devices.
int DeviceCount();
size_t MemoryCap();
void SetThreadDevice(int device);

}  // namespace lockstep::cuda_cpu::internal

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_RUNTIME_STATE_H_
