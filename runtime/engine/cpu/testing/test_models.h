// Test helpers: small models written once per test binary under TEST_TMPDIR, and a
// host-side KV pool (a float slab plus a seeded, scattered block allocator).
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_TEST_MODELS_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_TEST_MODELS_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ids.h"
#include "kvcache/block_layout.h"
#include "runtime/engine/cpu/paged_attention.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine::testing {

// The directory of make-model preset `preset` ("tiny", "tiny-moe") for `seed`, with
// its draft in DIR/draft; written on first use.
std::string PresetModelDir(const std::string& preset, uint64_t seed = 1);

// A model of `config` with seeded weights in a directory named `name`.
std::string CustomModelDir(const ModelConfig& config, const std::string& name, uint64_t seed = 1);

// The model families the engines run, each as a tiny model: llama and mistral (the
// "tiny" preset's shape), qwen2 (with attention bias), mixtral ("tiny-moe") and
// qwen3_moe (q/k norm, Qwen expert names).
inline constexpr const char* kModelFamilies[] = {"llama", "mistral", "qwen2", "mixtral",
                                                 "qwen3_moe"};
ModelConfig FamilyConfig(const std::string& family);
// The directory of FamilyConfig(family) with seeded weights (written on each call).
std::string FamilyModelDir(const std::string& family, uint64_t seed = 1);

// A KV pool slab with a block allocator that hands out blocks in a seeded random
// order, so block tables are scattered. Free blocks can be filled with a sentinel to
// check that nothing writes them.
class HostPool {
 public:
  HostPool(const kv::BlockLayout& layout, int32_t num_blocks, uint64_t seed);

  KvPoolView view() { return {storage_.data(), layout_, num_blocks_}; }
  float* storage() { return storage_.data(); }
  const kv::BlockLayout& layout() const { return layout_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t free_blocks() const { return static_cast<int32_t>(free_.size()); }

  // A free block; ResourceExhausted when none is left.
  absl::StatusOr<BlockId> Allocate();
  // Returns `block`; its contents are overwritten with the sentinel.
  void Free(BlockId block);
  // Grows `blocks` to cover `tokens` tokens.
  absl::Status Cover(std::vector<BlockId>& blocks, int64_t tokens);

  // Free blocks hold `kSentinel` everywhere; true when they still do.
  bool FreeBlocksUntouched() const;
  // Writes NaN into positions [from, to) of a sequence (every layer, K and V).
  void Scribble(const std::vector<BlockId>& blocks, int64_t from, int64_t to);
  // True when positions [from, to) of a sequence hold only NaN or the sentinel.
  bool Untouched(const std::vector<BlockId>& blocks, int64_t from, int64_t to) const;

  static constexpr float kSentinel = -12345.0f;

 private:
  // Calls fn(offset of a head_dim vector) for every slot of positions [from, to).
  template <typename Fn>
  void ForEachSlot(const std::vector<BlockId>& blocks, int64_t from, int64_t to, Fn&& fn) const;

  kv::BlockLayout layout_;
  int32_t num_blocks_;
  std::vector<float> storage_;
  std::vector<BlockId> free_;
  std::mt19937_64 rng_;
};

}  // namespace lockstep::engine::testing

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_TEST_MODELS_H_
