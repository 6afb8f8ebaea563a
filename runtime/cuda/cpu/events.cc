// Events: a record puts a marker on the stream; a query answers cudaErrorNotReady
// until the stream has reached it; cudaStreamWaitEvent makes a stream's later work
// wait for it. An event recorded on a capturing stream belongs to the capture: a
// stream that waits for it joins the capture, and querying or synchronising it is
// refused (cudaErrorCapturedEvent).
#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "cuda_runtime_api.h"
#include "runtime/cuda/cpu/runtime_state.h"

struct CUevent_st {
  unsigned flags = 0;
  lockstep::cuda_cpu::internal::MarkerPtr marker;  // of the last record (null: none)
  std::shared_ptr<lockstep::cuda_cpu::internal::Capture> captured;  // recorded in it
};

namespace {

namespace ci = lockstep::cuda_cpu::internal;

std::vector<CUevent_st*>& Events() {
  static auto* events = new std::vector<CUevent_st*>;
  return *events;
}

bool LiveLocked(cudaEvent_t event) {
  return event != nullptr && std::find(Events().begin(), Events().end(), event) != Events().end();
}

// Whether `event` was last recorded into a capture that is still going on.
bool CapturedLocked(const CUevent_st* event) {
  if (event->captured == nullptr) return false;
  for (CUstream_st* s : ci::StreamsLocked()) {
    if (s->capture == event->captured) return true;
  }
  return false;
}

}  // namespace

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr || (flags & ~0x7u) != 0) return ci::Ret(cudaErrorInvalidValue);
  if ((flags & cudaEventInterprocess) != 0 && (flags & cudaEventDisableTiming) == 0) {
    return ci::Ret(cudaErrorInvalidValue);
  }
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  *event = new CUevent_st{flags, nullptr, nullptr};
  Events().push_back(*event);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::unique_lock lock(ci::Mu());
  if (!LiveLocked(event)) return ci::Ret(cudaErrorInvalidResourceHandle);
  Events().erase(std::find(Events().begin(), Events().end(), event));
  delete event;
  return ci::CheckSticky();  // destroyed even so
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (!LiveLocked(event)) return ci::Ret(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  if (s->capture != nullptr) {
    if (s->capture->invalidated != cudaSuccess) return cudaErrorStreamCaptureInvalidated;
    event->captured = s->capture;
    event->marker = nullptr;
    return cudaSuccess;
  }
  ci::MarkerPtr done;
  const cudaError_t e = ci::SubmitLocked(
      s, "cudaEventRecord", [] { return cudaSuccess; }, {}, &done);
  if (e != cudaSuccess) return ci::Ret(e);
  event->captured = nullptr;
  event->marker = done;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  if (!LiveLocked(event)) return ci::Ret(cudaErrorInvalidResourceHandle);
  if (CapturedLocked(event)) return ci::Ret(cudaErrorCapturedEvent);
  const ci::MarkerPtr marker = event->marker;  // the event may go while the query waits
  if (!ci::QueryWaitLocked(lock, marker)) return cudaErrorNotReady;
  return ci::CheckSticky();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  if (!LiveLocked(event)) return ci::Ret(cudaErrorInvalidResourceHandle);
  if (CapturedLocked(event)) return ci::Ret(cudaErrorCapturedEvent);
  const ci::MarkerPtr marker = event->marker;
  ci::WaitLocked(lock, marker);
  return ci::CheckSticky();
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return ci::Ret(cudaErrorInvalidValue);
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  if (!LiveLocked(start) || !LiveLocked(end)) return ci::Ret(cudaErrorInvalidResourceHandle);
  if (((start->flags | end->flags) & cudaEventDisableTiming) != 0 || start->marker == nullptr ||
      end->marker == nullptr) {
    return ci::Ret(cudaErrorInvalidResourceHandle);
  }
  if (!start->marker->done || !end->marker->done) return ci::Ret(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(end->marker->at - start->marker->at).count();
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (flags != 0) return ci::Ret(cudaErrorInvalidValue);
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (!LiveLocked(event)) return ci::Ret(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  if (CapturedLocked(event)) {
    if (s->capture == nullptr) {  // forks `s` into the capture (nodes stay in call order)
      s->capture = event->captured;
      return cudaSuccess;
    }
    if (s->capture == event->captured) return cudaSuccess;
    ci::InvalidateLocked(*s->capture, cudaErrorStreamCaptureIsolation);
    return ci::Ret(cudaErrorStreamCaptureIsolation);
  }
  if (s->capture != nullptr) {  // a capture cannot wait for work outside it
    if (event->marker == nullptr || event->marker->done) return cudaSuccess;
    ci::InvalidateLocked(*s->capture, cudaErrorStreamCaptureIsolation);
    return ci::Ret(cudaErrorStreamCaptureIsolation);
  }
  if (event->marker == nullptr || event->marker->done) return cudaSuccess;
  return ci::Ret(
      ci::SubmitLocked(s, "cudaStreamWaitEvent", [] { return cudaSuccess; }, {event->marker}));
}
