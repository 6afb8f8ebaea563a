// DeviceBlockAllocator: KV block storage in the memory of one GPU (block_allocator.h).
//
// Each Allocate is one cudaMalloc of the whole pool, zero-filled (cudaMemset, then a
// device sync) before it returns, so it belongs at start-up, never inside a step. A
// failed cudaMalloc is ResourceExhausted naming the bytes asked for and the bytes free
// (cudaMemGetInfo). Copiers are DeviceBlockCopier (pinned bounce buffers).
//
// `kv.num_blocks: auto` sizes the pool from QueryDeviceMemory's free bytes after the
// weights and communicators are in place (AutoKvNumBlocks, runtime/config/deployment_config.h).
//
// Thread safety: Allocate, Free and MakeCopier from one thread at a time (the KV manager
// calls them at construction and destruction); each makes `device` current on the
// calling thread.
#ifndef LOCKSTEP_RUNTIME_CUDA_DEVICE_BLOCK_ALLOCATOR_H_
#define LOCKSTEP_RUNTIME_CUDA_DEVICE_BLOCK_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "kvcache/memory_kind.h"
#include "runtime/cuda/device_block_copier.h"

namespace lockstep::cuda {

struct DeviceMemory {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

// Free and total memory of `device` now (cudaMemGetInfo).
absl::StatusOr<DeviceMemory> QueryDeviceMemory(int device);

class DeviceBlockAllocator : public kv::BlockAllocator {
 public:
  explicit DeviceBlockAllocator(int device, DeviceCopierOptions copier_options = {})
      : device_(device), copier_options_(copier_options) {}

  absl::StatusOr<std::byte*> Allocate(size_t bytes) override;
  void Free(std::byte* p, size_t bytes) override;
  kv::MemoryKind memory_kind() const override { return kv::MemoryKind::kDevice; }
  absl::StatusOr<std::unique_ptr<kv::BlockCopier>> MakeCopier(std::byte* base,
                                                              const kv::BlockLayout& layout,
                                                              int32_t num_blocks) override;

  int device() const { return device_; }

 private:
  const int device_;
  const DeviceCopierOptions copier_options_;
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_DEVICE_BLOCK_ALLOCATOR_H_
