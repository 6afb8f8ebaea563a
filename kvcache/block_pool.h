// BlockPool: the blocks of one KV pool. One contiguous storage slab from a
// BlockAllocator (block b at byte b * BlockBytes(), block_layout.h) and the allocator's
// copier over it (block_copier.h), a reference count per
// block and two LIFO free lists: the general one and the dummy reserve (the highest
// block ids, used only by the pad dummy). A block with refcount 0 is on exactly one
// free list; a block with refcount > 0 is on none.
//
// Allocate, AddRef and Unref are O(1) and never allocate memory.
//
// Thread safety: not thread-safe; owned by the executor thread (through KvPool).
#ifndef LOCKSTEP_KVCACHE_BLOCK_POOL_H_
#define LOCKSTEP_KVCACHE_BLOCK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ids.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "kvcache/memory_kind.h"

namespace lockstep::kv {

class BlockPool {
 public:
  // Per-block metadata. Kept small: see kMaxMetadataBytesPerBlock in kv_pool.h.
  struct Meta {
    int32_t ref_count = 0;
    int32_t next_free = -1;  // next block on the same free list, -1 at the end
    bool reserved = false;   // belongs to the dummy reserve
    bool on_free_list = false;
  };

  // `num_reserved` blocks (the highest ids) form the dummy reserve. `allocator` must
  // outlive the pool.
  static absl::StatusOr<std::unique_ptr<BlockPool>> Create(const BlockLayout& layout,
                                                           int32_t num_blocks, int32_t num_reserved,
                                                           BlockAllocator* allocator);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Takes a block off a free list with refcount 1: for the dummy the reserve is tried
  // first, then the general list; for anyone else only the general list. nullopt when
  // those lists are empty.
  std::optional<BlockId> Allocate(bool for_dummy);
  void AddRef(BlockId block);
  // Drops one reference and returns the new count; at 0 the block goes back on the
  // free list it belongs to.
  int32_t Unref(BlockId block);

  int32_t ref_count(BlockId block) const { return meta_[Index(block)].ref_count; }
  bool is_reserved(BlockId block) const { return meta_[Index(block)].reserved; }
  bool on_free_list(BlockId block) const { return meta_[Index(block)].on_free_list; }

  int32_t num_blocks() const { return static_cast<int32_t>(meta_.size()); }
  int32_t num_reserved() const { return num_reserved_; }
  int32_t num_free() const { return general_.size; }
  int32_t num_reserved_free() const { return reserve_.size; }
  // Blocks `Allocate(for_dummy)` can hand out without eviction.
  int32_t num_available(bool for_dummy) const {
    return general_.size + (for_dummy ? reserve_.size : 0);
  }

  const BlockLayout& layout() const { return layout_; }
  // The slab; device memory when memory_kind() is kDevice (never dereference it then).
  std::byte* storage() const { return storage_; }
  MemoryKind memory_kind() const { return allocator_->memory_kind(); }
  // The copier over the slab; lives as long as the pool.
  BlockCopier* copier() const { return copier_.get(); }

  // Appends one line per broken free-list invariant, each starting with `prefix`.
  void AuditInto(const std::string& prefix, std::vector<std::string>* out) const;

 private:
  struct FreeList {
    int32_t head = -1;
    int32_t size = 0;
  };

  BlockPool(const BlockLayout& layout, int32_t num_blocks, int32_t num_reserved,
            BlockAllocator* allocator, std::byte* storage);
  size_t Index(BlockId block) const;
  void Push(FreeList& list, int32_t block);
  int32_t Pop(FreeList& list);

  const BlockLayout layout_;
  const int32_t num_reserved_;
  BlockAllocator* const allocator_;
  std::byte* const storage_;
  std::unique_ptr<BlockCopier> copier_;  // set by Create; destroyed before the slab
  std::vector<Meta> meta_;
  FreeList general_;
  FreeList reserve_;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_BLOCK_POOL_H_
