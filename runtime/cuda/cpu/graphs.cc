// Stream capture and graphs: while a stream captures, its work is recorded as the
// graph's nodes in order (a joined stream's too); a launch of the instantiated graph
// runs the nodes in that order as one op of the launching stream. The calls CUDA
// forbids during a capture fail with its capture errors and invalidate the capture,
// so cudaStreamEndCapture then returns cudaErrorStreamCaptureInvalidated.
#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "cuda_runtime_api.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/cpu/runtime_state.h"

struct CUgraph_st {
  std::shared_ptr<const std::vector<lockstep::cuda_cpu::internal::Node>> nodes;
};
struct CUgraphExec_st {
  std::shared_ptr<const std::vector<lockstep::cuda_cpu::internal::Node>> nodes;
};

namespace lockstep::cuda_cpu::internal {

void InvalidateLocked(Capture& capture, cudaError_t error) {
  if (capture.invalidated == cudaSuccess) capture.invalidated = error;
}

cudaError_t CheckUnsafeCallLocked() {
  cudaError_t result = cudaSuccess;
  const std::thread::id self = std::this_thread::get_id();
  for (CUstream_st* s : StreamsLocked()) {
    if (s->capture == nullptr) continue;
    const Capture& c = *s->capture;
    const bool mine = c.thread == self;
    if ((mine && c.mode != cudaStreamCaptureModeRelaxed) ||
        (!mine && c.mode == cudaStreamCaptureModeGlobal)) {
      InvalidateLocked(*s->capture, cudaErrorStreamCaptureUnsupported);
      result = cudaErrorStreamCaptureUnsupported;
    }
  }
  return result;
}

}  // namespace lockstep::cuda_cpu::internal

namespace {

namespace ci = lockstep::cuda_cpu::internal;
using Nodes = std::shared_ptr<const std::vector<ci::Node>>;

std::atomic<unsigned long long> next_capture_id{1};

template <class T>
std::vector<T*>& Live() {
  static auto* live = new std::vector<T*>;
  return *live;
}

template <class T>
bool LiveLocked(T* handle) {
  return handle != nullptr &&
         std::find(Live<T>().begin(), Live<T>().end(), handle) != Live<T>().end();
}

template <class T>
cudaError_t DestroyLocked(T* handle) {
  if (!LiveLocked(handle)) return ci::Ret(cudaErrorInvalidResourceHandle);
  Live<T>().erase(std::find(Live<T>().begin(), Live<T>().end(), handle));
  delete handle;
  return ci::CheckSticky();  // destroyed even so
}

}  // namespace

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) {
    return ci::Ret(cudaErrorInvalidValue);
  }
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  if (s->legacy) return ci::Ret(cudaErrorStreamCaptureUnsupported);
  if (s->capture != nullptr) return ci::Ret(cudaErrorIllegalState);
  auto capture = std::make_shared<ci::Capture>();
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->id = next_capture_id++;
  capture->origin = s;
  s->capture = std::move(capture);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  if (pGraph == nullptr) return ci::Ret(cudaErrorInvalidValue);
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  if (s->capture == nullptr) return ci::Ret(cudaErrorIllegalState);
  const std::shared_ptr<ci::Capture> capture = s->capture;
  if (capture->origin != s) return ci::Ret(cudaErrorStreamCaptureUnmatched);
  if (capture->mode != cudaStreamCaptureModeRelaxed &&
      capture->thread != std::this_thread::get_id()) {
    return ci::Ret(cudaErrorStreamCaptureWrongThread);
  }
  for (CUstream_st* t : ci::StreamsLocked()) {
    if (t->capture == capture) t->capture = nullptr;
  }
  *pGraph = nullptr;
  if (capture->invalidated != cudaSuccess) return ci::Ret(cudaErrorStreamCaptureInvalidated);
  *pGraph = new CUgraph_st{std::make_shared<const std::vector<ci::Node>>(capture->nodes)};
  Live<CUgraph_st>().push_back(*pGraph);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus) {
  if (pCaptureStatus == nullptr) return ci::Ret(cudaErrorInvalidValue);
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  *pCaptureStatus = s->capture == nullptr                    ? cudaStreamCaptureStatusNone
                    : s->capture->invalidated != cudaSuccess ? cudaStreamCaptureStatusInvalidated
                                                             : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (pGraphExec == nullptr || flags != 0) return ci::Ret(cudaErrorInvalidValue);
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  if (!LiveLocked(graph)) return ci::Ret(cudaErrorInvalidValue);
  *pGraphExec = new CUgraphExec_st{graph->nodes};
  Live<CUgraphExec_st>().push_back(*pGraphExec);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (!LiveLocked(graphExec)) return ci::Ret(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  if (ci::GraphLaunchFails()) return ci::Ret(cudaErrorLaunchFailure);
  Nodes nodes = graphExec->nodes;
  const int device = s->device;
  return ci::Ret(ci::SubmitLocked(s, "cudaGraphLaunch", [nodes, device] {
    for (const ci::Node& node : *nodes) {
      if (const cudaError_t e = node.op(); e != cudaSuccess) {
        ci::SetStickyErrorOn(device, e, "graph node " + node.name);
        return e;
      }
    }
    return cudaSuccess;
  }));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  std::unique_lock lock(ci::Mu());
  return DestroyLocked(graphExec);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  std::unique_lock lock(ci::Mu());
  return DestroyLocked(graph);
}
