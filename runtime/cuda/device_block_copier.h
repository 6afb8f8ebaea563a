// DeviceBlockCopier: the BlockCopier for a KV slab in device memory (block_copier.h).
//
// A call is cut into chunks (copy_plan.h). Each chunk goes through one of two pinned,
// mapped host bounce buffers of `chunk_bytes`: CopyOut runs the gather kernel
// (block_copy_kernels.h), which reads the chunk's segments from the slab and writes
// them straight into the bounce buffer, then copies the buffer into the caller's memory;
// CopyIn fills a bounce buffer from the caller's memory and runs the scatter kernel.
// The two buffers alternate, so the host copies one chunk while the device moves the
// next. Kernels run on the copier's own non-blocking stream; an event per buffer says
// when its kernel is done, and every wait polls that event against a deadline.
//
// Ownership: the copier owns its stream, events and pinned buffers (made in Create,
// freed in the destructor, which waits for its stream); it does not own the slab.
// Thread safety: calls are serialized by an internal mutex; any thread may call (each
// call makes `device` current on its thread). After a CUDA error or a missed deadline
// the copier is broken: every later call is FailedPrecondition.
#ifndef LOCKSTEP_RUNTIME_CUDA_DEVICE_BLOCK_COPIER_H_
#define LOCKSTEP_RUNTIME_CUDA_DEVICE_BLOCK_COPIER_H_

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "kvcache/memory_kind.h"
#include "runtime/cuda/copy_plan.h"
#include "runtime/cuda/copy_segment.h"

namespace lockstep::cuda {

struct DeviceCopierOptions {
  ChunkLimits limits;
  // Longest wait for one chunk's kernel; past it the call is DeadlineExceeded.
  absl::Duration chunk_timeout = absl::Seconds(30);
};

class DeviceBlockCopier : public kv::BlockCopier {
 public:
  // `slab` is device memory on `device` holding `num_blocks` blocks of `layout`.
  static absl::StatusOr<std::unique_ptr<DeviceBlockCopier>> Create(
      int device, std::byte* slab, const kv::BlockLayout& layout, int32_t num_blocks,
      const DeviceCopierOptions& options = {});
  ~DeviceBlockCopier() override;

  kv::MemoryKind memory_kind() const override { return kv::MemoryKind::kDevice; }

 protected:
  absl::Status DoCopyOut(absl::Span<const kv::BlockSpan> spans,
                         absl::Span<std::byte> host) override;
  absl::Status DoCopyIn(absl::Span<const std::byte> host,
                        absl::Span<const kv::BlockSpan> spans) override;

 private:
  // One bounce buffer and what is in flight in it.
  struct Slot {
    std::byte* buffer = nullptr;      // pinned, mapped; chunk_bytes
    CopySegment* segments = nullptr;  // pinned, mapped; limits.max_segments
    // The same two buffers as the kernel addresses them (cudaHostGetDevicePointer).
    std::byte* device_buffer = nullptr;
    CopySegment* device_segments = nullptr;
    cudaEvent_t done = nullptr;  // recorded after the slot's kernel
    bool busy = false;           // a kernel was enqueued and not yet waited for
    ChunkPlanner::Chunk chunk;   // what the slot holds
  };
  enum class Direction { kOut, kIn };

  DeviceBlockCopier(int device, std::byte* slab, const kv::BlockLayout& layout, int32_t num_blocks,
                    const DeviceCopierOptions& options);
  absl::Status Init();
  absl::Status Copy(Direction direction, absl::Span<const kv::BlockSpan> spans, std::byte* host)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for `slot`'s kernel; for CopyOut, then moves its bytes to `host`.
  absl::Status Retire(Direction direction, Slot& slot, std::byte* host)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WaitForEvent(cudaEvent_t event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the first error of a call; later calls are FailedPrecondition.
  absl::Status Break(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  std::byte* const slab_;
  const DeviceCopierOptions options_;
  cudaStream_t stream_ = nullptr;
  absl::Mutex mu_;
  std::array<Slot, 2> slots_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_DEVICE_BLOCK_COPIER_H_
