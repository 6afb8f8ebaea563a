#include "runtime/transfer/kv_descriptor.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace lockstep::transfer {
namespace {

using kv::BlockLayout;
using kv::PoolKind;

absl::Status Differ(absl::string_view field, const auto& context, const auto& generation) {
  return absl::FailedPreconditionError(absl::StrCat("KV descriptors differ: ", field, ": context ",
                                                    context, ", generation ", generation));
}

absl::Status CheckPool(PoolKind kind, const std::optional<BlockLayout>& context,
                       const std::optional<BlockLayout>& generation) {
  const std::string pool = kv::PoolKindName(kind);
  if (context.has_value() != generation.has_value()) {
    return Differ(absl::StrCat(pool, " pool"), context ? "present" : "absent",
                  generation ? "present" : "absent");
  }
  if (!context.has_value()) return absl::OkStatus();
  const struct {
    const char* name;
    int BlockLayout::*field;
  } kFields[] = {
      {"tokens_per_block", &BlockLayout::tokens_per_block},
      {"num_layers", &BlockLayout::num_layers},
      {"num_kv_heads", &BlockLayout::num_kv_heads},
      {"head_dim", &BlockLayout::head_dim},
      {"element_bytes", &BlockLayout::element_bytes},
  };
  for (const auto& f : kFields) {
    if ((*context).*f.field != (*generation).*f.field) {
      return Differ(absl::StrCat(pool, " ", f.name), (*context).*f.field, (*generation).*f.field);
    }
  }
  return absl::OkStatus();
}

void LayoutToProto(const BlockLayout& layout, lockstep::v1::KvPoolDescriptor* proto) {
  proto->set_present(true);
  lockstep::v1::KvBlockLayout* l = proto->mutable_layout();
  l->set_num_layers(layout.num_layers);
  l->set_num_kv_heads(layout.num_kv_heads);
  l->set_head_dim(layout.head_dim);
  l->set_tokens_per_block(layout.tokens_per_block);
}

// The wire carries the element size as the descriptor's dtype.
std::optional<BlockLayout> LayoutFromProto(const lockstep::v1::KvPoolDescriptor& proto,
                                           int element_bytes) {
  if (!proto.present()) return std::nullopt;
  BlockLayout layout;
  layout.element_bytes = element_bytes;
  layout.num_layers = proto.layout().num_layers();
  layout.num_kv_heads = proto.layout().num_kv_heads();
  layout.head_dim = proto.layout().head_dim();
  layout.tokens_per_block = proto.layout().tokens_per_block();
  return layout;
}

}  // namespace

absl::StatusOr<int> DtypeElementBytes(absl::string_view dtype) {
  if (dtype == "f32") return 4;
  if (dtype == "bf16" || dtype == "f16") return 2;
  return absl::InvalidArgumentError(
      absl::StrCat("KV dtype '", dtype, "' is not one of f32, bf16, f16"));
}

absl::Status KvDescriptor::Validate() const {
  if (model.empty()) return absl::InvalidArgumentError("KV descriptor: model is empty");
  if (dtype.empty()) return absl::InvalidArgumentError("KV descriptor: dtype is empty");
  const absl::StatusOr<int> element_bytes = DtypeElementBytes(dtype);
  if (!element_bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV descriptor: ", element_bytes.status().message()));
  }
  if (!target.has_value()) {
    return absl::InvalidArgumentError("KV descriptor: the target pool is absent");
  }
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    if (!pool(kind).has_value()) continue;
    const absl::Status valid = pool(kind)->Validate();
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV descriptor: ", kv::PoolKindName(kind), " layout: ", valid.message()));
    }
    if (pool(kind)->element_bytes != *element_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV descriptor: ", kv::PoolKindName(kind), " layout has element_bytes ",
          pool(kind)->element_bytes, " but dtype ", dtype, " has ", *element_bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCopiers(const KvDescriptor& descriptor, const KvCopiers& copiers) {
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    if (!descriptor.pool(kind).has_value()) continue;
    const char* pool = kv::PoolKindName(kind);
    const kv::BlockCopier* copier = copiers.pool(kind);
    if (copier == nullptr || copier->num_blocks() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", pool, " pool is described but has no copier (or no blocks)"));
    }
    if (!(copier->layout() == *descriptor.pool(kind))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", pool, " pool's copier has layout ", copier->layout().ToString(),
          ", the descriptor ", descriptor.pool(kind)->ToString()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBlockRefs(const kv::BlockRefs& blocks, int64_t num_tokens,
                            const KvDescriptor& descriptor, const KvCopiers& copiers) {
  const int64_t id = blocks.id.value();
  if (num_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", id, ": num_tokens ", num_tokens, " is not positive"));
  }
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    const bool target = kind == PoolKind::kTarget;
    const std::vector<BlockId>& table = target ? blocks.blocks : blocks.draft_blocks;
    if (!target && blocks.draft_generation == 0) {
      if (!table.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("request ", id, ": draft blocks without a draft cache generation"));
      }
      continue;
    }
    const char* pool = kv::PoolKindName(kind);
    if (!descriptor.pool(kind).has_value() || copiers.pool(kind) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", id, " has a ", pool, " cache but this rank has no ", pool, " pool"));
    }
    const int64_t need = descriptor.pool(kind)->BlocksFor(num_tokens);
    if (static_cast<int64_t>(table.size()) < need) {
      return absl::InvalidArgumentError(absl::StrCat("request ", id, ": ", pool, " table has ",
                                                     table.size(), " blocks, ", num_tokens,
                                                     " tokens need ", need));
    }
    for (int64_t i = 0; i < need; ++i) {
      const int32_t num_blocks = copiers.pool(kind)->num_blocks();
      if (table[i].value() < 0 || table[i].value() >= num_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("request ", id, ": ", pool, " block ", table[i].value(), " (table index ",
                         i, ") is outside the pool's ", num_blocks, " blocks"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCompatible(const KvDescriptor& context, const KvDescriptor& generation) {
  if (context.model != generation.model) {
    return Differ("model", absl::StrCat("'", context.model, "'"),
                  absl::StrCat("'", generation.model, "'"));
  }
  if (context.dtype != generation.dtype) return Differ("dtype", context.dtype, generation.dtype);
  RETURN_IF_ERROR(CheckPool(PoolKind::kTarget, context.target, generation.target));
  // The generation side may keep no draft KV: the context's is left behind.
  if (context.draft.has_value() && !generation.draft.has_value()) return absl::OkStatus();
  return CheckPool(PoolKind::kDraft, context.draft, generation.draft);
}

absl::StatusOr<bool> MovesDraftKv(const KvDescriptor& generation, bool context_cache,
                                  bool generation_cache) {
  if (context_cache == generation_cache) return context_cache;
  if (context_cache && !generation.draft.has_value()) return false;
  return absl::FailedPreconditionError(
      absl::StrCat("draft cache: context ", context_cache ? "present" : "absent", ", generation ",
                   generation_cache ? "present" : "absent"));
}

KvDescriptor DescribeKv(const kv::KvManager& kv, std::string model, std::string dtype) {
  KvDescriptor d;
  d.model = std::move(model);
  d.dtype = std::move(dtype);
  d.target = kv.layout(PoolKind::kTarget);
  if (kv.has_draft()) d.draft = kv.layout(PoolKind::kDraft);
  return d;
}

KvCopiers CopiersOf(const kv::KvManager& kv) {
  return {kv.Copier(PoolKind::kTarget), kv.Copier(PoolKind::kDraft)};
}

void ToProto(const KvDescriptor& descriptor, lockstep::v1::KvDescriptor* proto) {
  proto->set_model(descriptor.model);
  proto->set_dtype(descriptor.dtype);
  if (descriptor.target) LayoutToProto(*descriptor.target, proto->mutable_target());
  if (descriptor.draft) LayoutToProto(*descriptor.draft, proto->mutable_draft());
}

absl::StatusOr<KvDescriptor> FromProto(const lockstep::v1::KvDescriptor& proto) {
  KvDescriptor d;
  d.model = proto.model();
  d.dtype = proto.dtype();
  // An unknown dtype fails Validate below.
  const int element_bytes = DtypeElementBytes(d.dtype).value_or(4);
  d.target = LayoutFromProto(proto.target(), element_bytes);
  d.draft = LayoutFromProto(proto.draft(), element_bytes);
  RETURN_IF_ERROR(d.Validate());
  return d;
}

}  // namespace lockstep::transfer
