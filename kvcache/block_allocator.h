// Where KV block storage comes from. A pool asks for ONE contiguous slab of
// `num_blocks * BlockFloats()` floats at construction and returns it at destruction
// (block_layout.h). The host allocator backs the CPU engine. A device allocator (CUDA)
// is planned, not built (docs/design.md §10); it would implement this interface in a leaf
// target.
#ifndef LOCKSTEP_KVCACHE_BLOCK_ALLOCATOR_H_
#define LOCKSTEP_KVCACHE_BLOCK_ALLOCATOR_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace lockstep::kv {

// Thread safety: implementations must allow Allocate/Free from any one thread at a
// time; the KV manager calls them only at construction and destruction.
class BlockAllocator {
 public:
  virtual ~BlockAllocator() = default;

  // Storage for `num_floats` floats, zero-filled, aligned to at least 64 bytes.
  // InvalidArgument for 0 floats; ResourceExhausted when the memory is not there.
  virtual absl::StatusOr<float*> Allocate(size_t num_floats) = 0;
  // Returns storage from Allocate with the same `num_floats`.
  virtual void Free(float* p, size_t num_floats) = 0;
};

// Host memory: 64-byte aligned, zero-filled. Stateless, so one instance may serve any
// number of pools.
class HostAllocator : public BlockAllocator {
 public:
  static constexpr size_t kAlignment = 64;

  absl::StatusOr<float*> Allocate(size_t num_floats) override;
  void Free(float* p, size_t num_floats) override;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_BLOCK_ALLOCATOR_H_
