// Streams: each is a FIFO of work run in order by its own worker thread. The legacy
// default stream (one per device, made on first use) waits for earlier work on the
// device's blocking streams, and they wait for earlier legacy work, as in CUDA. Work
// on a capturing stream goes into its capture instead (graphs.cc).
#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuda_runtime_api.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/cpu/runtime_state.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace lockstep::cuda_cpu {
namespace internal {
namespace {

// Process-lifetime state (never destroyed: detached workers may outlive main).
struct Streams {
  std::vector<CUstream_st*> live;
  std::vector<CUstream_st*> draining;  // destroyed, work still to finish
  std::vector<CUstream_st*> legacy;    // by device, made on first use
};
Streams& S() {
  static Streams* s = new Streams;
  return *s;
}

thread_local CUstream_st* running_stream = nullptr;  // on a worker: its stream

bool Ready(const Item& item) {
  return std::all_of(item.after.begin(), item.after.end(),
                     [](const MarkerPtr& m) { return m->done; });
}

void RunItem(CUstream_st* s, Item& item) {
  if (StickyError(s->device) != cudaSuccess) return;  // later work does not run
  const cudaError_t error = item.op();
  if (error != cudaSuccess) SetStickyErrorOn(s->device, error, "stream op " + item.name);
}

void Work(CUstream_st* s) {
  running_stream = s;
  SetThreadDevice(s->device);
  std::unique_lock lock(Mu());
  for (;;) {
    Cv().wait(lock, [&] {
      return (!s->queue.empty() && Ready(s->queue.front())) ||
             (s->destroyed && (s->queue.empty() || s->hung));
    });
    if (s->destroyed && (s->queue.empty() || s->hung)) break;
    Item item = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    RunItem(s, item);
    item.op = nullptr;  // what the op holds goes before the marker completes
    lock.lock();
    item.done->done = true;
    item.done->at = Clock::now();
    Cv().notify_all();
  }
  // Destroyed: work held behind an injected hang never runs.
  for (Item& item : s->queue) item.done->done = true;
  Cv().notify_all();
  auto& draining = S().draining;
  draining.erase(std::find(draining.begin(), draining.end(), s));
  delete s;
}

CUstream_st* NewStreamLocked(int device, unsigned flags, bool legacy) {
  auto* s = new CUstream_st;
  s->device = device;
  s->flags = flags;
  s->legacy = legacy;
  S().live.push_back(s);
  std::thread(Work, s).detach();
  return s;
}

}  // namespace

std::mutex& Mu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

std::condition_variable& Cv() {
  static std::condition_variable* cv = new std::condition_variable;
  return *cv;
}

const std::vector<CUstream_st*>& StreamsLocked() { return S().live; }

cudaError_t ResolveLocked(cudaStream_t handle, CUstream_st** out) {
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    const int device = CurrentDevice();
    std::vector<CUstream_st*>& legacy = S().legacy;
    if (legacy.size() <= static_cast<size_t>(device)) legacy.resize(device + 1, nullptr);
    if (legacy[device] == nullptr) legacy[device] = NewStreamLocked(device, 0, true);
    *out = legacy[device];
    return cudaSuccess;
  }
  const auto& live = S().live;
  if (std::find(live.begin(), live.end(), handle) == live.end()) {
    return cudaErrorInvalidResourceHandle;
  }
  *out = handle;
  return cudaSuccess;
}

cudaError_t SubmitLocked(CUstream_st* s, std::string name, StreamOp op,
                         std::vector<MarkerPtr> after, MarkerPtr* done) {
  if (s->capture != nullptr) {
    if (s->capture->invalidated != cudaSuccess) return cudaErrorStreamCaptureInvalidated;
    s->capture->nodes.push_back(Node{std::move(name), std::move(op)});
    if (done != nullptr) *done = nullptr;
    return cudaSuccess;
  }
  for (CUstream_st* t : S().live) {
    if (t == s || t->device != s->device) continue;
    const bool blocking = !t->legacy && (t->flags & cudaStreamNonBlocking) == 0;
    if (s->legacy && blocking && t->capture != nullptr) {
      InvalidateLocked(*t->capture, cudaErrorStreamCaptureImplicit);
      return cudaErrorStreamCaptureImplicit;
    }
    const bool implicit =
        s->legacy ? blocking : t->legacy && (s->flags & cudaStreamNonBlocking) == 0;
    if (implicit && t->last != nullptr && !t->last->done) after.push_back(t->last);
  }
  Item item{std::move(name), std::move(op), std::move(after), std::make_shared<Marker>()};
  s->last = item.done;
  if (done != nullptr) *done = item.done;
  s->queue.push_back(std::move(item));
  Cv().notify_all();
  return cudaSuccess;
}

void WaitLocked(std::unique_lock<std::mutex>& lock, const MarkerPtr& marker) {
  if (marker == nullptr) return;
  Cv().wait(lock, [&] { return marker->done; });
}

bool QueryWaitLocked(std::unique_lock<std::mutex>& lock, const MarkerPtr& marker) {
  return marker == nullptr || Cv().wait_for(lock, kQueryWait, [&] { return marker->done; });
}

void DrainLocked(std::unique_lock<std::mutex>& lock, int device) {
  std::vector<MarkerPtr> pending;
  for (const auto* list : {&S().live, &S().draining}) {
    for (CUstream_st* s : *list) {
      if ((device < 0 || s->device == device) && !s->hung && s->last != nullptr) {
        pending.push_back(s->last);
      }
    }
  }
  for (const MarkerPtr& m : pending) WaitLocked(lock, m);
}

void HangUntilStreamDestroyed() {
  std::unique_lock lock(Mu());
  CUstream_st* s = running_stream;
  if (s == nullptr) return;
  s->hung = true;
  Cv().notify_all();
  Cv().wait(lock, [&] { return s->destroyed; });
}

}  // namespace internal

cudaError_t Enqueue(cudaStream_t stream, std::string_view name, StreamOp op) {
  if (const cudaError_t sticky = internal::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(internal::Mu());
  CUstream_st* s = nullptr;
  if (const cudaError_t e = internal::ResolveLocked(stream, &s); e != cudaSuccess) {
    return internal::Ret(e);
  }
  std::string label(name);
  StreamOp run = [label, op = std::move(op)] { return internal::RunWithFaults(label, op); };
  return internal::Ret(internal::SubmitLocked(s, std::move(label), std::move(run)));
}

bool IsCapturing(cudaStream_t stream) {
  std::unique_lock lock(internal::Mu());
  CUstream_st* s = nullptr;
  return internal::ResolveLocked(stream, &s) == cudaSuccess && s->capture != nullptr;
}

}  // namespace lockstep::cuda_cpu

namespace ci = lockstep::cuda_cpu::internal;

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  if (pStream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) {
    return ci::Ret(cudaErrorInvalidValue);
  }
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  *pStream = ci::NewStreamLocked(lockstep::cuda_cpu::CurrentDevice(), flags, false);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread ||
      ci::ResolveLocked(stream, &s) != cudaSuccess) {
    return ci::Ret(cudaErrorInvalidResourceHandle);
  }
  auto& live = ci::S().live;
  live.erase(std::find(live.begin(), live.end(), s));
  ci::S().draining.push_back(s);
  s->destroyed = true;  // its worker finishes the work already enqueued, then deletes it
  ci::Cv().notify_all();
  return ci::CheckSticky();  // destroyed even so
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  if (s->capture != nullptr) {
    ci::InvalidateLocked(*s->capture, cudaErrorStreamCaptureUnsupported);
    return ci::Ret(cudaErrorStreamCaptureUnsupported);
  }
  ci::MarkerPtr done = s->last;
  if (s->legacy) {  // also waits for the blocking streams' earlier work
    const cudaError_t e = ci::SubmitLocked(
        s, "legacy stream synchronize", [] { return cudaSuccess; }, {}, &done);
    if (e != cudaSuccess) return ci::Ret(e);
  }
  ci::WaitLocked(lock, done);
  return ci::CheckSticky();
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  if (s->capture != nullptr) {
    ci::InvalidateLocked(*s->capture, cudaErrorStreamCaptureUnsupported);
    return ci::Ret(cudaErrorStreamCaptureUnsupported);
  }
  const ci::MarkerPtr last = s->last;  // the stream may go while the query waits
  return ci::QueryWaitLocked(lock, last) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  if (fn == nullptr) return ci::Ret(cudaErrorInvalidValue);
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  return ci::Ret(ci::SubmitLocked(s, "host function", [fn, userData] {
    fn(userData);
    return cudaSuccess;
  }));
}
