#include "kvcache/kv_types.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace lockstep::kv {
namespace {

absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

}  // namespace

const char* PoolKindName(PoolKind pool) {
  switch (pool) {
    case PoolKind::kTarget:
      return "target";
    case PoolKind::kDraft:
      return "draft";
  }
  return "unknown";
}

const char* DraftModeName(DraftMode mode) {
  switch (mode) {
    case DraftMode::kNone:
      return "none";
    case DraftMode::kPaired:
      return "paired";
    case DraftMode::kUnpaired:
      return "unpaired";
  }
  return "unknown";
}

absl::Status PoolConfig::Validate() const {
  RETURN_IF_ERROR(layout.Validate());
  if (num_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_blocks must be >= 1, got ", num_blocks));
  }
  if (layout.BlockBytes() > std::numeric_limits<size_t>::max() / static_cast<size_t>(num_blocks)) {
    return absl::InvalidArgumentError(
        absl::StrCat(num_blocks, " blocks of ", layout.ToString(), " do not fit in memory"));
  }
  return absl::OkStatus();
}

absl::Status KvManagerConfig::Validate() const {
  RETURN_IF_ERROR(WithPrefix(target.Validate(), "target pool: "));
  if (draft_mode != DraftMode::kNone && draft_mode != DraftMode::kPaired &&
      draft_mode != DraftMode::kUnpaired) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft_mode has no such value: ", static_cast<int>(draft_mode)));
  }
  if (draft_mode != DraftMode::kNone) {
    RETURN_IF_ERROR(WithPrefix(draft.Validate(), "draft pool: "));
  }
  if (dummy_reserved_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dummy_reserved_tokens must be >= 0, got ", dummy_reserved_tokens));
  }
  for (const auto& [pool, name] :
       {std::pair<const PoolConfig*, const char*>{&target, "target"}, {&draft, "draft"}}) {
    if (pool == &draft && draft_mode == DraftMode::kNone) continue;
    const int32_t reserved = static_cast<int32_t>(pool->layout.BlocksFor(dummy_reserved_tokens));
    if (reserved >= pool->num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dummy_reserved_tokens = ", dummy_reserved_tokens, " needs ", reserved, " blocks of the ",
          name, " pool, which has only ", pool->num_blocks, " (must leave at least one)"));
    }
  }
  RETURN_IF_ERROR(tiers.Validate());
  if (tiers.enabled() && draft_mode != DraftMode::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_tiers hold target blocks only: they need draft_mode none, not ",
        DraftModeName(draft_mode), " (a draft pool's KV would not travel with its block)"));
  }
  if (tiers.enabled() && !target.enable_prefix_reuse) {
    return absl::InvalidArgumentError("kv_tiers need prefix reuse on in the target pool");
  }
  return absl::OkStatus();
}

}  // namespace lockstep::kv
