// The local KV as the transfer sees it: what it means (KvDescriptor: model identity,
// element type, the block layout of each pool) and how to reach it (KvCopiers: the
// copier of each pool, kvcache/block_copier.h). The transfer never sees a block's
// address, so the pools may be host or device memory. Two ranks may exchange KV only
// when their descriptors match field for field (CheckCompatible), except that a
// generation rank without a draft pool may take a context rank's target KV alone.
//
// Thread safety: value types; the copiers they point to are thread-safe.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_KV_DESCRIPTOR_H_
#define LOCKSTEP_RUNTIME_TRANSFER_KV_DESCRIPTOR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ids.h"
#include "kvcache/block_copier.h"
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
  // A target pool with a valid layout, a valid draft layout if any, a model, and a
  // known dtype (DtypeElementBytes) whose size every layout's element_bytes matches.
  absl::Status Validate() const;
};

// Bytes per element of a KV dtype: "f32" 4, "bf16" and "f16" 2. InvalidArgument for
// another name.
absl::StatusOr<int> DtypeElementBytes(absl::string_view dtype);

// The copier of each local pool (not owned; null for an absent pool).
struct KvCopiers {
  kv::BlockCopier* target = nullptr;
  kv::BlockCopier* draft = nullptr;

  kv::BlockCopier* pool(kv::PoolKind kind) const {
    return kind == kv::PoolKind::kTarget ? target : draft;
  }
};

// Whether `copiers` serve `descriptor`: a copier for every pool the descriptor has,
// with the same layout. InvalidArgument naming the pool otherwise.
absl::Status CheckCopiers(const KvDescriptor& descriptor, const KvCopiers& copiers);

// Whether the KV of `num_tokens` tokens in `blocks` can be moved under `descriptor` /
// `copiers`: at least one token; the target table (and the draft table, when the
// request has a draft cache: a non-zero draft_generation) holds the BlocksFor(num_tokens)
// blocks that move, every one of them in its pool; a draft cache only with a draft
// pool. InvalidArgument naming the problem.
absl::Status CheckBlockRefs(const kv::BlockRefs& blocks, int64_t num_tokens,
                            const KvDescriptor& descriptor, const KvCopiers& copiers);

// OK when KV produced under `context` can be used under `generation`; otherwise
// FailedPrecondition naming the first differing field and both values, e.g.
// "KV descriptors differ: target tokens_per_block: context 16, generation 32". The
// model, dtype and target pool must match; a draft pool present on both sides must
// match too. A context draft pool with no generation draft pool is compatible (the
// generation side keeps no draft KV and the pull leaves the context's draft KV behind,
// MovesDraftKv); a generation draft pool with none on the context side is not (nothing
// would fill it).
absl::Status CheckCompatible(const KvDescriptor& context, const KvDescriptor& generation);

// Whether a pull moves the request's draft KV, given the generation side's descriptor
// (already CheckCompatible with the context's) and whether the request has a draft
// cache on each side (`context_cache`, `generation_cache`): true when both have one;
// false when neither has, or when the context has one and the generation side has no
// draft pool at all (it drops the draft KV). FailedPrecondition naming both sides
// otherwise (a draft cache on one side only while both sides have a draft pool).
absl::StatusOr<bool> MovesDraftKv(const KvDescriptor& generation, bool context_cache,
                                  bool generation_cache);

// The descriptor and copiers of a KvManager's pools. The copiers stay valid while the
// manager lives.
KvDescriptor DescribeKv(const kv::KvManager& kv, std::string model, std::string dtype = "f32");
KvCopiers CopiersOf(const kv::KvManager& kv);

// Wire conversion. FromProto validates (InvalidArgument naming the field).
void ToProto(const KvDescriptor& descriptor, lockstep::v1::KvDescriptor* proto);
absl::StatusOr<KvDescriptor> FromProto(const lockstep::v1::KvDescriptor& proto);

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_KV_DESCRIPTOR_H_
