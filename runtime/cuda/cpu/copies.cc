// Copies and fills with CUDA's API synchronisation behaviour: cudaMemcpy is
// synchronous (on the legacy stream); cudaMemcpyAsync between device and pinned
// memory reads its source when the stream gets there, from pageable memory it copies
// the source at the call, and to pageable memory it returns once the copy is done;
// cudaMemset is asynchronous (on the legacy stream). A device-side range must lie
// inside one live allocation (device memory, or pinned memory under unified
// addressing).
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda_runtime_api.h"
#include "runtime/cuda/cpu/memory.h"
#include "runtime/cuda/cpu/runtime_state.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace {

namespace cc = lockstep::cuda_cpu;
namespace ci = lockstep::cuda_cpu::internal;

enum class Place { kDevice, kPinned, kPageable, kBad };

// Where [p, p + bytes) lies; kBad for a range that starts in an allocation and runs
// past its end.
Place Where(const void* p, size_t bytes) {
  const std::optional<cc::Allocation> a = cc::FindAllocation(p);
  if (!a.has_value()) return Place::kPageable;
  const auto* end = static_cast<const std::byte*>(p) + bytes;
  if (end > a->base + a->bytes) return Place::kBad;
  return a->device ? Place::kDevice : Place::kPinned;
}

// Whether `kind` fits where the two ranges are (device-side: device or pinned memory).
bool KindFits(cudaMemcpyKind kind, Place dst, Place src) {
  const auto device_side = [](Place p) { return p == Place::kDevice || p == Place::kPinned; };
  switch (kind) {
    case cudaMemcpyHostToHost:
      return dst != Place::kDevice && src != Place::kDevice;
    case cudaMemcpyHostToDevice:
      return device_side(dst) && src != Place::kDevice;
    case cudaMemcpyDeviceToHost:
      return device_side(src) && dst != Place::kDevice;
    case cudaMemcpyDeviceToDevice:
      return device_side(dst) && device_side(src);
    case cudaMemcpyDefault:
      return true;
  }
  return false;
}

cudaError_t CheckCopy(void* dst, const void* src, size_t dst_span, size_t src_span,
                      cudaMemcpyKind kind, Place* to, Place* from) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  if (dst_span == 0 && src_span == 0) {
    *to = *from = Place::kDevice;
    return cudaSuccess;
  }
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  *to = Where(dst, dst_span);
  *from = Where(src, src_span);
  if (*to == Place::kBad || *from == Place::kBad) return cudaErrorInvalidValue;
  if (!KindFits(kind, *to, *from)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

// Puts `op` on `stream` with the synchronisation the places call for.
cudaError_t SubmitCopy(cudaStream_t stream, Place to, Place from, const char* name, cc::StreamOp op,
                       bool sync) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  std::unique_lock lock(ci::Mu());
  if (sync) {
    if (const cudaError_t e = ci::CheckUnsafeCallLocked(); e != cudaSuccess) return ci::Ret(e);
  }
  CUstream_st* s = nullptr;
  if (const cudaError_t e = ci::ResolveLocked(stream, &s); e != cudaSuccess) return ci::Ret(e);
  ci::MarkerPtr done;
  if (const cudaError_t e = ci::SubmitLocked(s, name, std::move(op), {}, &done); e != cudaSuccess) {
    return ci::Ret(e);
  }
  if (sync || (to == Place::kPageable && s->capture == nullptr)) {
    ci::WaitLocked(lock, done);
    return ci::CheckSticky();
  }
  (void)from;
  return cudaSuccess;
}

cudaError_t Copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                 bool sync) {
  Place to, from;
  if (const cudaError_t e = CheckCopy(dst, src, count, count, kind, &to, &from); e != cudaSuccess) {
    return ci::Ret(e);
  }
  cc::StreamOp op;
  if (from == Place::kPageable && !sync && !cc::IsCapturing(stream)) {
    auto staged = std::make_shared<std::vector<std::byte>>(
        static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + count);
    op = [dst, staged] {
      std::memcpy(dst, staged->data(), staged->size());
      return cudaSuccess;
    };
  } else {
    op = [dst, src, count] {
      if (count > 0) std::memmove(dst, src, count);
      return cudaSuccess;
    };
  }
  return SubmitCopy(stream, to, from, sync ? "cudaMemcpy" : "cudaMemcpyAsync", std::move(op), sync);
}

cudaError_t Fill(void* devPtr, int value, size_t count, cudaStream_t stream) {
  if (count == 0) return ci::CheckSticky();
  const Place at = Where(devPtr, count);
  if (devPtr == nullptr || at == Place::kBad || at == Place::kPageable) {
    return ci::Ret(cudaErrorInvalidValue);
  }
  cc::StreamOp op = [devPtr, value, count] {
    if (value == 0 && count >= ci::kPoisonLimit) {
      ci::ZeroPages(devPtr, count);
    } else {
      std::memset(devPtr, value, count);
    }
    return cudaSuccess;
  };
  return SubmitCopy(stream, Place::kDevice, Place::kDevice, "cudaMemset", std::move(op), false);
}

}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return Copy(dst, src, count, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return Copy(dst, src, count, kind, stream, false);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  if (width > dpitch || width > spitch) return ci::Ret(cudaErrorInvalidPitchValue);
  if (width == 0 || height == 0) return ci::CheckSticky();
  Place to, from;
  const size_t dst_span = (height - 1) * dpitch + width;
  const size_t src_span = (height - 1) * spitch + width;
  if (const cudaError_t e = CheckCopy(dst, src, dst_span, src_span, kind, &to, &from);
      e != cudaSuccess) {
    return ci::Ret(e);
  }
  if (to == Place::kPageable || from == Place::kPageable) {
    return ci::Ret(cudaErrorInvalidValue);  // Lockstep copies 2D between device buffers only
  }
  cc::StreamOp op = [=] {
    for (size_t row = 0; row < height; ++row) {
      std::memmove(static_cast<std::byte*>(dst) + row * dpitch,
                   static_cast<const std::byte*>(src) + row * spitch, width);
    }
    return cudaSuccess;
  };
  return SubmitCopy(stream, to, from, "cudaMemcpy2DAsync", std::move(op), false);
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  return Fill(devPtr, value, count, nullptr);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return Fill(devPtr, value, count, stream);
}
