#include "runtime/engine/cpu/testing/test_models.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::engine::testing {

std::string PresetModelDir(const std::string& preset, uint64_t seed) {
  const std::string dir =
      JoinPath(std::getenv("TEST_TMPDIR"), absl::StrCat("model_", preset, "_", seed));
  if (!std::filesystem::exists(JoinPath(dir, "draft/model.safetensors"))) {
    MakeModelOptions options;
    options.preset = preset;
    options.out_dir = dir;
    options.seed = seed;
    const absl::Status status = MakeModel(options);
    LOCKSTEP_CHECK(status.ok()) << status;
  }
  return dir;
}

std::string CustomModelDir(const ModelConfig& config, const std::string& name, uint64_t seed) {
  const std::string dir =
      JoinPath(std::getenv("TEST_TMPDIR"), absl::StrCat("custom_", name, "_", seed));
  const absl::Status status = WriteModel(config, dir, seed, DType::kF32);
  LOCKSTEP_CHECK(status.ok()) << status;
  return dir;
}

ModelConfig FamilyConfig(const std::string& family) {
  const bool moe = family == "mixtral" || family == "qwen3_moe";
  absl::StatusOr<ModelConfig> preset = PresetConfig(moe ? "tiny-moe" : "tiny");
  LOCKSTEP_CHECK(preset.ok()) << preset.status();
  ModelConfig config = *preset;
  config.model_type = family;
  if (family == "qwen2") config.attention_bias = true;
  if (family == "qwen3_moe") {
    config.qk_norm = true;
    config.moe_naming = MoeNaming::kQwen;
  }
  return config;
}

std::string FamilyModelDir(const std::string& family, uint64_t seed) {
  return CustomModelDir(FamilyConfig(family), family, seed);
}

HostPool::HostPool(const kv::BlockLayout& layout, int32_t num_blocks, uint64_t seed)
    : layout_(layout),
      num_blocks_(num_blocks),
      storage_(static_cast<size_t>(num_blocks) * layout.BlockElements(), kSentinel),
      rng_(seed) {
  for (int32_t b = 0; b < num_blocks; ++b) free_.push_back(BlockId(b));
  std::shuffle(free_.begin(), free_.end(), rng_);
}

absl::StatusOr<BlockId> HostPool::Allocate() {
  if (free_.empty()) return absl::ResourceExhaustedError("test pool is out of blocks");
  const BlockId block = free_.back();
  free_.pop_back();
  return block;
}

void HostPool::Free(BlockId block) {
  std::fill_n(storage_.data() + static_cast<size_t>(block.value()) * layout_.BlockElements(),
              layout_.BlockElements(), kSentinel);
  // Insert at a random place so reuse order stays scattered.
  free_.insert(free_.begin() + static_cast<int64_t>(rng_() % (free_.size() + 1)), block);
}

absl::Status HostPool::Cover(std::vector<BlockId>& blocks, int64_t tokens) {
  while (static_cast<int64_t>(blocks.size()) < layout_.BlocksFor(tokens)) {
    absl::StatusOr<BlockId> block = Allocate();
    if (!block.ok()) return block.status();
    blocks.push_back(*block);
  }
  return absl::OkStatus();
}

bool HostPool::FreeBlocksUntouched() const {
  for (BlockId block : free_) {
    const float* data =
        storage_.data() + static_cast<size_t>(block.value()) * layout_.BlockElements();
    for (size_t i = 0; i < layout_.BlockElements(); ++i) {
      if (data[i] != kSentinel) return false;
    }
  }
  return true;
}

template <typename Fn>
void HostPool::ForEachSlot(const std::vector<BlockId>& blocks, int64_t from, int64_t to,
                           Fn&& fn) const {
  to = std::min<int64_t>(to, static_cast<int64_t>(blocks.size()) * layout_.tokens_per_block);
  for (int64_t p = std::max<int64_t>(from, 0); p < to; ++p) {
    const size_t block =
        static_cast<size_t>(blocks[p / layout_.tokens_per_block].value()) * layout_.BlockElements();
    for (int l = 0; l < layout_.num_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        for (int h = 0; h < layout_.num_kv_heads; ++h) {
          fn(block + layout_.Offset(l, kv, h, static_cast<int>(p % layout_.tokens_per_block)));
        }
      }
    }
  }
}

void HostPool::Scribble(const std::vector<BlockId>& blocks, int64_t from, int64_t to) {
  ForEachSlot(blocks, from, to, [&](size_t offset) {
    std::fill_n(storage_.data() + offset, layout_.head_dim, std::nanf(""));
  });
}

bool HostPool::Untouched(const std::vector<BlockId>& blocks, int64_t from, int64_t to) const {
  bool untouched = true;
  ForEachSlot(blocks, from, to, [&](size_t offset) {
    for (int d = 0; d < layout_.head_dim; ++d) {
      const float x = storage_[offset + d];
      untouched = untouched && (std::isnan(x) || x == kSentinel);
    }
  });
  return untouched;
}

}  // namespace lockstep::engine::testing
