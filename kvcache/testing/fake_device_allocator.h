// FakeDeviceAllocator: host memory that calls itself device memory, for tests that must
// prove code reaches KV blocks only through their copier (block_copier.h). Allocate
// hands out an address range that is reserved but inaccessible (PROT_NONE): any direct
// read or write through a slab pointer crashes the test. The bytes live in a hidden
// host shadow that only the allocator's copiers reach; they count their calls and
// bytes, so a test can also see that the copier was used.
//
// Testonly. Thread safety: thread-safe (copiers may run on several threads at once).
#ifndef LOCKSTEP_KVCACHE_TESTING_FAKE_DEVICE_ALLOCATOR_H_
#define LOCKSTEP_KVCACHE_TESTING_FAKE_DEVICE_ALLOCATOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "kvcache/memory_kind.h"

namespace lockstep::kv::testing {

class FakeDeviceAllocator : public BlockAllocator {
 public:
  FakeDeviceAllocator() = default;
  ~FakeDeviceAllocator() override;  // every allocation must have been freed
  FakeDeviceAllocator(const FakeDeviceAllocator&) = delete;
  FakeDeviceAllocator& operator=(const FakeDeviceAllocator&) = delete;

  // An inaccessible, page-aligned range of `bytes` with a zero-filled shadow.
  absl::StatusOr<std::byte*> Allocate(size_t bytes) override;
  void Free(std::byte* p, size_t bytes) override;
  MemoryKind memory_kind() const override { return MemoryKind::kDevice; }
  // A copier over the shadow of `base` (which must come from Allocate); counts into this
  // allocator, which must outlive it.
  absl::StatusOr<std::unique_ptr<BlockCopier>> MakeCopier(std::byte* base,
                                                          const BlockLayout& layout,
                                                          int32_t num_blocks) override;

  // Calls and bytes of every copier made here, since construction.
  int64_t copy_out_calls() const { return copy_out_calls_.load(); }
  int64_t copy_in_calls() const { return copy_in_calls_.load(); }
  int64_t bytes_out() const { return bytes_out_.load(); }
  int64_t bytes_in() const { return bytes_in_.load(); }

 private:
  class Copier;
  struct Region {
    size_t bytes = 0;  // of the reservation and the shadow
    std::unique_ptr<std::byte[]> shadow;
  };

  absl::Mutex mu_;
  absl::flat_hash_map<std::byte*, Region> regions_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> copy_out_calls_{0};
  std::atomic<int64_t> copy_in_calls_{0};
  std::atomic<int64_t> bytes_out_{0};
  std::atomic<int64_t> bytes_in_{0};
};

}  // namespace lockstep::kv::testing

#endif  // LOCKSTEP_KVCACHE_TESTING_FAKE_DEVICE_ALLOCATOR_H_
