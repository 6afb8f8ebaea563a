// The local KV as the transfer sees it: what it means (KvDescriptor: model identity,
// element type, the block layout of each pool) and where it lives (KvSlabs: the base of
// each pool's contiguous storage). Two ranks may exchange KV only when their
// descriptors match field for field (CheckCompatible).
//
// Thread safety: value types.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_KV_DESCRIPTOR_H_
#define LOCKSTEP_RUNTIME_TRANSFER_KV_DESCRIPTOR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ids.h"
#include "kvcache/block_layout.h"
#include "kvcache/kv_manager.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/transfer/transceiver.h"

namespace lockstep::transfer {

struct KvDescriptor {
  std::string model;  // model identity (name and weights revision)
  std::string dtype = "f32";
  std::optional<kv::BlockLayout> target;  // nullopt: the pool is absent
  std::optional<kv::BlockLayout> draft;

  const std::optional<kv::BlockLayout>& pool(kv::PoolKind kind) const {
    return kind == kv::PoolKind::kTarget ? target : draft;
  }
  // A target pool with a valid layout, a valid draft layout if any, a model and dtype.
  absl::Status Validate() const;
};

// One pool's storage: block b occupies `layout.BlockBytes()` bytes at
// `base + b * layout.BlockBytes()`.
struct PoolSlab {
  std::byte* base = nullptr;
  int32_t num_blocks = 0;
};

struct KvSlabs {
  PoolSlab target;
  PoolSlab draft;

  const PoolSlab& pool(kv::PoolKind kind) const {
    return kind == kv::PoolKind::kTarget ? target : draft;
  }
};

// The bytes of block `block` of a pool.
inline uint8_t* BlockData(const PoolSlab& slab, const kv::BlockLayout& layout, BlockId block) {
  return reinterpret_cast<uint8_t*>(slab.base +
                                    static_cast<size_t>(block.value()) * layout.BlockBytes());
}

// Whether the KV of `num_tokens` tokens in `blocks` can be moved under `descriptor` /
// `slabs`: at least one token; the target table (and the draft table, when the request
// has a draft cache: a non-zero draft_generation) holds the BlocksFor(num_tokens)
// blocks that move, every one of them in its slab; a draft cache only with a draft
// pool. InvalidArgument naming the problem.
absl::Status CheckBlockRefs(const kv::BlockRefs& blocks, int64_t num_tokens,
                            const KvDescriptor& descriptor, const KvSlabs& slabs);

// OK when KV produced under `context` can be used under `generation`; otherwise
// FailedPrecondition naming the first differing field and both values, e.g.
// "KV descriptors differ: target tokens_per_block: context 16, generation 32".
absl::Status CheckCompatible(const KvDescriptor& context, const KvDescriptor& generation);

// The descriptor and slabs of a KvManager's pools. The slabs stay valid while the
// manager lives.
KvDescriptor DescribeKv(const kv::KvManager& kv, std::string model, std::string dtype = "f32");
KvSlabs SlabsOf(const kv::KvManager& kv);

// Wire conversion. FromProto validates (InvalidArgument naming the field).
void ToProto(const KvDescriptor& descriptor, lockstep::v1::KvDescriptor* proto);
absl::StatusOr<KvDescriptor> FromProto(const lockstep::v1::KvDescriptor& proto);

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_KV_DESCRIPTOR_H_
