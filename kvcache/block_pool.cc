#include "kvcache/block_pool.h"

#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"

namespace lockstep::kv {

absl::StatusOr<std::unique_ptr<BlockPool>> BlockPool::Create(const BlockLayout& layout,
                                                             int32_t num_blocks,
                                                             int32_t num_reserved,
                                                             BlockAllocator* allocator) {
  RETURN_IF_ERROR(layout.Validate());
  if (num_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_blocks must be >= 1, got ", num_blocks));
  }
  if (num_reserved < 0 || num_reserved > num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reserved blocks (", num_reserved, ") must be in [0, num_blocks = ", num_blocks, "]"));
  }
  if (allocator == nullptr) return absl::InvalidArgumentError("block allocator is null");
  if (layout.BlockBytes() > std::numeric_limits<size_t>::max() / static_cast<size_t>(num_blocks)) {
    return absl::InvalidArgumentError(absl::StrCat("pool of ", num_blocks, " blocks of ",
                                                   layout.ToString(), " overflows size_t"));
  }
  ASSIGN_OR_RETURN(std::byte * storage,
                   allocator->Allocate(static_cast<size_t>(num_blocks) * layout.BlockBytes()));
  // The pool owns the slab from here on, so a failed copier frees it.
  std::unique_ptr<BlockPool> pool(
      new BlockPool(layout, num_blocks, num_reserved, allocator, storage));
  ASSIGN_OR_RETURN(pool->copier_, allocator->MakeCopier(storage, layout, num_blocks));
  if (pool->copier_ == nullptr) return absl::InternalError("the block allocator made no copier");
  return pool;
}

BlockPool::BlockPool(const BlockLayout& layout, int32_t num_blocks, int32_t num_reserved,
                     BlockAllocator* allocator, std::byte* storage)
    : layout_(layout),
      num_reserved_(num_reserved),
      allocator_(allocator),
      storage_(storage),
      meta_(static_cast<size_t>(num_blocks)) {
  // Pushed in descending order so that a fresh pool hands out ascending ids.
  for (int32_t b = num_blocks - 1; b >= 0; --b) {
    const bool reserved = b >= num_blocks - num_reserved;
    meta_[b].reserved = reserved;
    Push(reserved ? reserve_ : general_, b);
  }
}

BlockPool::~BlockPool() {
  copier_.reset();
  allocator_->Free(storage_, meta_.size() * layout_.BlockBytes());
}

size_t BlockPool::Index(BlockId block) const {
  LOCKSTEP_DCHECK(block.value() >= 0 && static_cast<size_t>(block.value()) < meta_.size())
      << "block " << block << " outside a pool of " << meta_.size();
  return static_cast<size_t>(block.value());
}

void BlockPool::Push(FreeList& list, int32_t block) {
  Meta& m = meta_[block];
  m.next_free = list.head;
  m.on_free_list = true;
  list.head = block;
  ++list.size;
}

int32_t BlockPool::Pop(FreeList& list) {
  const int32_t block = list.head;
  Meta& m = meta_[block];
  list.head = m.next_free;
  --list.size;
  m.next_free = -1;
  m.on_free_list = false;
  return block;
}

std::optional<BlockId> BlockPool::Allocate(bool for_dummy) {
  FreeList* list = nullptr;
  if (for_dummy && reserve_.size > 0) {
    list = &reserve_;
  } else if (general_.size > 0) {
    list = &general_;
  } else {
    return std::nullopt;
  }
  const int32_t block = Pop(*list);
  LOCKSTEP_CHECK(meta_[block].ref_count == 0) << "free block " << block << " is referenced";
  meta_[block].ref_count = 1;
  return BlockId(block);
}

void BlockPool::AddRef(BlockId block) {
  Meta& m = meta_[Index(block)];
  LOCKSTEP_CHECK(m.ref_count > 0) << "AddRef on free block " << block;
  ++m.ref_count;
}

int32_t BlockPool::Unref(BlockId block) {
  Meta& m = meta_[Index(block)];
  LOCKSTEP_CHECK(m.ref_count > 0) << "refcount underflow on block " << block;
  if (--m.ref_count == 0) Push(m.reserved ? reserve_ : general_, block.value());
  return m.ref_count;
}

void BlockPool::AuditInto(const std::string& prefix, std::vector<std::string>* out) const {
  std::vector<bool> seen(meta_.size(), false);
  for (const auto& [list, reserved] :
       {std::pair<const FreeList*, bool>{&general_, false}, {&reserve_, true}}) {
    const char* name = reserved ? "dummy reserve" : "free list";
    int32_t count = 0;
    for (int32_t b = list->head; b != -1; b = meta_[b].next_free) {
      if (b < 0 || static_cast<size_t>(b) >= meta_.size()) {
        out->push_back(absl::StrCat(prefix, name, " links to block ", b, " outside the pool"));
        break;
      }
      if (seen[b]) {
        out->push_back(absl::StrCat(prefix, "block ", b, " is on the free lists twice"));
        break;
      }
      seen[b] = true;
      ++count;
      const Meta& m = meta_[b];
      if (m.ref_count != 0) {
        out->push_back(
            absl::StrCat(prefix, "block ", b, " is on the ", name, " with refcount ", m.ref_count));
      }
      if (m.reserved != reserved) {
        out->push_back(absl::StrCat(prefix, "block ", b, " is on the ", name, " but is ",
                                    m.reserved ? "" : "not ", "reserved"));
      }
    }
    if (count != list->size) {
      out->push_back(
          absl::StrCat(prefix, name, " holds ", count, " blocks but counts ", list->size));
    }
  }
  for (size_t b = 0; b < meta_.size(); ++b) {
    const Meta& m = meta_[b];
    if (m.on_free_list != seen[b]) {
      out->push_back(absl::StrCat(prefix, "block ", b, " is ", seen[b] ? "" : "not ",
                                  "on a free list but flagged otherwise"));
    }
    if (m.ref_count < 0) {
      out->push_back(absl::StrCat(prefix, "block ", b, " has refcount ", m.ref_count));
    } else if (m.ref_count == 0 && !seen[b]) {
      out->push_back(
          absl::StrCat(prefix, "block ", b, " has refcount 0 but is on no free list (leaked)"));
    }
  }
}

}  // namespace lockstep::kv
