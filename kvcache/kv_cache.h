// KvCache: the cache of one request in one pool. A block table plus three lengths,
// committed <= history <= capacity, a status and a generation number that names this
// cache instance for its whole life (never reused by the manager).
//
// The block table always covers capacity exactly: BlocksFor(capacity) blocks. Its first
// `tree_blocks()` entries are radix-tree nodes forming a chain from the root (reused or
// published prefix); the rest belong to this cache alone.
//
// KvCache holds data and the length rules; KvPool moves blocks in and out of it.
//
// Thread safety: not thread-safe; owned by the executor thread (through KvPool).
#ifndef LOCKSTEP_KVCACHE_KV_CACHE_H_
#define LOCKSTEP_KVCACHE_KV_CACHE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/kv_types.h"

namespace lockstep::kv {

class KvCache {
 public:
  // Lengths after a resize.
  struct Lengths {
    int64_t capacity = 0;
    int64_t history = 0;
  };

  // Makes this (possibly recycled) cache a fresh active cache of `id`, empty; keeps the
  // block table's memory.
  void Reset(RequestId id, uint64_t generation);

  // Resolves a resize (nullopt keeps a length) against the rules; changes nothing.
  //   FailedPrecondition when the cache is not active;
  //   InvalidArgument("history length cannot decrease");
  //   InvalidArgument("history length cannot exceed capacity").
  absl::StatusOr<Lengths> ResolveResize(std::optional<int64_t> capacity,
                                        std::optional<int64_t> history) const;

  RequestId id() const { return id_; }
  uint64_t generation() const { return generation_; }
  int64_t committed() const { return committed_; }
  int64_t history() const { return history_; }
  int64_t capacity() const { return capacity_; }
  CacheStatus status() const { return status_; }
  bool active() const { return status_ == CacheStatus::kActive; }
  CacheInfo Info() const;

  absl::Span<const BlockId> blocks() const { return blocks_; }
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t tree_blocks() const { return tree_blocks_; }
  bool publishing_stopped() const { return publishing_stopped_; }

  // ---- Mutators for KvPool (no checks beyond DCHECKs). ----
  void set_status(CacheStatus status) { status_ = status; }
  void SetLengths(const Lengths& lengths);
  void RaiseCommitted(int64_t committed);
  void PushBlock(BlockId block) { blocks_.push_back(block); }
  BlockId PopBlock();
  // The next table entry is a tree node (reused or just published).
  void AddTreeBlock() { ++tree_blocks_; }
  void StopPublishing() { publishing_stopped_ = true; }
  void ClearBlocks() { blocks_.clear(); }

 private:
  RequestId id_;
  uint64_t generation_ = 0;
  int64_t committed_ = 0;
  int64_t history_ = 0;
  int64_t capacity_ = 0;
  CacheStatus status_ = CacheStatus::kClosed;
  std::vector<BlockId> blocks_;
  int32_t tree_blocks_ = 0;
  bool publishing_stopped_ = false;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_KV_CACHE_H_
