// Where KV block storage comes from. A pool asks for ONE contiguous slab of
// `num_blocks * BlockBytes()` bytes at construction and returns it at destruction
// (block_layout.h), and gets from the same allocator the BlockCopier that reaches that
// slab (block_copier.h). Every allocator says what memory it hands out: host memory
// (HostAllocator, for the CPU engine) may be dereferenced; device memory (a CUDA
// allocator in runtime/cuda/, in the CUDA build) may not, and is reached only through
// its copier.
#ifndef LOCKSTEP_KVCACHE_BLOCK_ALLOCATOR_H_
#define LOCKSTEP_KVCACHE_BLOCK_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "kvcache/memory_kind.h"

namespace lockstep::kv {

// Thread safety: implementations must allow Allocate/Free/MakeCopier from any one
// thread at a time; the KV manager calls them only at construction and destruction.
class BlockAllocator {
 public:
  virtual ~BlockAllocator() = default;

  // `bytes` of storage, zero-filled, aligned to at least 64 bytes. InvalidArgument for
  // 0 bytes; ResourceExhausted when the memory is not there (naming the bytes asked
  // for).
  virtual absl::StatusOr<std::byte*> Allocate(size_t bytes) = 0;
  // Returns storage from Allocate with the same `bytes`.
  virtual void Free(std::byte* p, size_t bytes) = 0;
  // What memory Allocate hands out.
  virtual MemoryKind memory_kind() const = 0;
  // A copier over `base`, a slab of `num_blocks` blocks of `layout` from this
  // allocator's Allocate. The slab must outlive the copier.
  virtual absl::StatusOr<std::unique_ptr<BlockCopier>> MakeCopier(std::byte* base,
                                                                  const BlockLayout& layout,
                                                                  int32_t num_blocks) = 0;
};

// Host memory: 64-byte aligned, zero-filled; copiers are HostBlockCopier. Stateless,
// so one instance may serve any number of pools.
class HostAllocator : public BlockAllocator {
 public:
  static constexpr size_t kAlignment = 64;

  absl::StatusOr<std::byte*> Allocate(size_t bytes) override;
  void Free(std::byte* p, size_t bytes) override;
  MemoryKind memory_kind() const override { return MemoryKind::kHost; }
  absl::StatusOr<std::unique_ptr<BlockCopier>> MakeCopier(std::byte* base,
                                                          const BlockLayout& layout,
                                                          int32_t num_blocks) override;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_BLOCK_ALLOCATOR_H_
