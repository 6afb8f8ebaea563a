#include "runtime/cuda/device_block_copier.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/block_copy_kernels.h"
#include "runtime/cuda/cuda_status.h"

namespace lockstep::cuda {

absl::StatusOr<std::unique_ptr<DeviceBlockCopier>> DeviceBlockCopier::Create(
    int device, std::byte* slab, const kv::BlockLayout& layout, int32_t num_blocks,
    const DeviceCopierOptions& options) {
  if (slab == nullptr) return absl::InvalidArgumentError("a device copier over a null slab");
  if (absl::Status s = layout.Validate(); !s.ok()) return s;
  if (absl::Status s = options.limits.Validate(); !s.ok()) return s;
  if (options.chunk_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("chunk_timeout must be > 0");
  }
  std::unique_ptr<DeviceBlockCopier> copier(
      new DeviceBlockCopier(device, slab, layout, num_blocks, options));
  if (absl::Status s = copier->Init(); !s.ok()) return s;
  return copier;
}

DeviceBlockCopier::DeviceBlockCopier(int device, std::byte* slab, const kv::BlockLayout& layout,
                                     int32_t num_blocks, const DeviceCopierOptions& options)
    : BlockCopier(layout, num_blocks), device_(device), slab_(slab), options_(options) {}

absl::Status DeviceBlockCopier::Init() {
  absl::MutexLock lock(&mu_);
  const std::string where = absl::StrCat("device copier on device ", device_);
  if (absl::Status s = CudaStatus(cudaSetDevice(device_), where); !s.ok()) return s;
  if (absl::Status s = CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                                  absl::StrCat(where, ": cudaStreamCreate"));
      !s.ok()) {
    return s;
  }
  constexpr unsigned kPinnedFlags = cudaHostAllocMapped | cudaHostAllocPortable;
  for (Slot& slot : slots_) {
    void* buffer = nullptr;
    void* segments = nullptr;
    absl::Status s = CudaStatus(
        cudaHostAlloc(&buffer, options_.limits.chunk_bytes, kPinnedFlags),
        absl::StrCat(where, ": pinned bounce buffer of ", options_.limits.chunk_bytes, " bytes"));
    slot.buffer = static_cast<std::byte*>(buffer);
    if (s.ok()) {
      s = CudaStatus(cudaHostAlloc(&segments, sizeof(CopySegment) * options_.limits.max_segments,
                                   kPinnedFlags),
                     absl::StrCat(where, ": pinned segment table"));
      slot.segments = static_cast<CopySegment*>(segments);
    }
    void* device_buffer = nullptr;
    void* device_segments = nullptr;
    if (s.ok()) {
      s = CudaStatus(cudaHostGetDevicePointer(&device_buffer, buffer, 0),
                     absl::StrCat(where, ": cudaHostGetDevicePointer"));
    }
    if (s.ok()) {
      s = CudaStatus(cudaHostGetDevicePointer(&device_segments, segments, 0),
                     absl::StrCat(where, ": cudaHostGetDevicePointer"));
    }
    slot.device_buffer = static_cast<std::byte*>(device_buffer);
    slot.device_segments = static_cast<CopySegment*>(device_segments);
    if (s.ok()) {
      s = CudaStatus(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming),
                     absl::StrCat(where, ": cudaEventCreate"));
    }
    if (!s.ok()) return s;  // the destructor frees what was made
  }
  return absl::OkStatus();
}

DeviceBlockCopier::~DeviceBlockCopier() {
  absl::MutexLock lock(&mu_);
  cudaSetDevice(device_);
  // A kernel may still be reading or writing a bounce buffer (after an error or a
  // missed deadline); wait for it before freeing.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (Slot& slot : slots_) {
    if (slot.done != nullptr) cudaEventDestroy(slot.done);
    if (slot.segments != nullptr) cudaFreeHost(slot.segments);
    if (slot.buffer != nullptr) cudaFreeHost(slot.buffer);
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status DeviceBlockCopier::DoCopyOut(absl::Span<const kv::BlockSpan> spans,
                                          absl::Span<std::byte> host) {
  absl::MutexLock lock(&mu_);
  return Copy(Direction::kOut, spans, host.data());
}

absl::Status DeviceBlockCopier::DoCopyIn(absl::Span<const std::byte> host,
                                         absl::Span<const kv::BlockSpan> spans) {
  absl::MutexLock lock(&mu_);
  // CopyIn only reads `host`; Copy's pointer is shared by both directions.
  return Copy(Direction::kIn, spans, const_cast<std::byte*>(host.data()));
}

absl::Status DeviceBlockCopier::Copy(Direction direction, absl::Span<const kv::BlockSpan> spans,
                                     std::byte* host) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("device copier on device ", device_, " is broken: ", broken_.message()));
  }
  if (absl::Status s = CudaStatus(cudaSetDevice(device_), "device copier: cudaSetDevice");
      !s.ok()) {
    return Break(std::move(s));
  }
  ChunkPlanner planner(spans, block_bytes(), options_.limits);
  // Slots are used in turn; before a slot is refilled, its previous chunk is retired.
  size_t next = 0;
  while (true) {
    Slot& slot = slots_[next % slots_.size()];
    if (slot.busy) {
      if (absl::Status s = Retire(direction, slot, host); !s.ok()) return s;
    }
    if (!planner.Next(slot.segments, &slot.chunk)) break;
    cudaError_t err;
    if (direction == Direction::kOut) {
      err = LaunchGatherSegments(slab_, slot.device_buffer, slot.device_segments,
                                 slot.chunk.num_segments, stream_);
    } else {
      std::memcpy(slot.buffer, host + slot.chunk.host_offset, slot.chunk.bytes);
      err = LaunchScatterSegments(slab_, slot.device_buffer, slot.device_segments,
                                  slot.chunk.num_segments, stream_);
    }
    if (err == cudaSuccess) err = cudaEventRecord(slot.done, stream_);
    if (err != cudaSuccess) {
      return Break(CudaStatus(
          err, absl::StrCat("device copier: block copy kernel of ", slot.chunk.bytes, " bytes")));
    }
    slot.busy = true;
    ++next;
  }
  // Retire what is still in flight, oldest first.
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[(next + i) % slots_.size()];
    if (!slot.busy) continue;
    if (absl::Status s = Retire(direction, slot, host); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DeviceBlockCopier::Retire(Direction direction, Slot& slot, std::byte* host) {
  if (absl::Status s = WaitForEvent(slot.done); !s.ok()) return s;
  slot.busy = false;
  if (direction == Direction::kOut) {
    std::memcpy(host + slot.chunk.host_offset, slot.buffer, slot.chunk.bytes);
  }
  return absl::OkStatus();
}

absl::Status DeviceBlockCopier::WaitForEvent(cudaEvent_t event) {
  const absl::Time deadline = absl::Now() + options_.chunk_timeout;
  // Spin briefly (a chunk takes tens of microseconds to a few milliseconds), then sleep.
  absl::Duration pause = absl::ZeroDuration();
  while (true) {
    const cudaError_t err = cudaEventQuery(event);
    if (err == cudaSuccess) return absl::OkStatus();
    if (err != cudaErrorNotReady) {
      return Break(CudaStatus(err, "device copier: block copy kernel"));
    }
    if (absl::Now() >= deadline) {
      return Break(absl::DeadlineExceededError(
          absl::StrCat("device copier on device ", device_, ": a chunk's kernel did not finish in ",
                       absl::FormatDuration(options_.chunk_timeout))));
    }
    if (pause > absl::ZeroDuration()) absl::SleepFor(pause);
    pause = pause == absl::ZeroDuration() ? absl::Microseconds(20)
                                          : std::min(pause * 2, absl::Milliseconds(1));
  }
}

absl::Status DeviceBlockCopier::Break(absl::Status status) {
  if (broken_.ok()) broken_ = status;
  return status;
}

}  // namespace lockstep::cuda
