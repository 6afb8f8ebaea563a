// The DeepSeek-V3 family on the CPU transformer: multi-head latent attention in its two
// forms (absorbed, expanded) agrees, the latent cache gives the same logits however the
// tokens arrive (prefill in one forward or decode one by one: bitwise), the cache holds
// only the latent vector per token and layer, and expert parallelism over 4 ranks
// equals one rank bitwise (routed experts sharded, shared experts on every rank).
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::CustomModelDir;
using ::lockstep::engine::testing::HostPool;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

// A tiny DeepSeek-V3: 3 layers (the first dense), 8 routed experts in 4 groups, one
// shared expert; YaRN over an original context of 16 (tests reach past it).
ModelConfig TinyDeepseek(bool q_lora, bool yarn) {
  const std::string json = absl::StrCat(
      R"({"model_type": "deepseek_v3", "vocab_size": 300, "hidden_size": 64,
      "intermediate_size": 96, "moe_intermediate_size": 24, "num_hidden_layers": 3,
      "num_attention_heads": 4, "num_key_value_heads": 4, "n_shared_experts": 1,
      "n_routed_experts": 8, "routed_scaling_factor": 2.5, "kv_lora_rank": 24,
      "qk_rope_head_dim": 8, "v_head_dim": 12, "qk_nope_head_dim": 16, "n_group": 4,
      "topk_group": 2, "num_experts_per_tok": 3, "first_k_dense_replace": 1,
      "norm_topk_prob": true, "max_position_embeddings": 256, "bos_token_id": 256,
      "eos_token_id": 257, "q_lora_rank": )",
      q_lora ? "32" : "null",
      yarn ? R"(, "rope_scaling": {"type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 16, "beta_fast": 32, "beta_slow": 1,
      "mscale": 1.0, "mscale_all_dim": 1.0}})"
           : "}");
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json, "tiny-deepseek");
  LOCKSTEP_CHECK_OK(config.status());
  return *config;
}

std::string ModelDir(bool q_lora, bool yarn) {
  return CustomModelDir(TinyDeepseek(q_lora, yarn),
                        absl::StrCat("deepseek_q", q_lora, "_yarn", yarn), 7);
}

std::unique_ptr<Transformer> Load(const std::string& dir, ExpertGroup group = {}) {
  auto model = Transformer::Load(dir, "target", group);
  LOCKSTEP_CHECK_OK(model.status());
  return std::move(model).value();
}

std::vector<int32_t> RandomTokens(int n, std::mt19937_64& rng) {
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
  return tokens;
}

// Forwards tokens [start, start + size) of one sequence in one forward; the logits of
// every row.
std::vector<float> Forward(const Transformer& model, HostPool& pool, std::vector<BlockId>& blocks,
                           int64_t start, const std::vector<int32_t>& tokens) {
  LOCKSTEP_CHECK_OK(pool.Cover(blocks, start + static_cast<int64_t>(tokens.size())));
  std::vector<ForwardRow> rows;
  std::vector<int32_t> logit_rows;
  const std::vector<SequenceKv> seqs = {SequenceKv{absl::MakeConstSpan(blocks)}};
  for (size_t j = 0; j < tokens.size(); ++j) {
    logit_rows.push_back(static_cast<int32_t>(j));
    rows.push_back({tokens[j], start + static_cast<int64_t>(j), 0});
  }
  Arena arena;
  absl::StatusOr<const float*> logits =
      model.Forward({rows, seqs, logit_rows}, pool.view(), arena, nullptr);
  LOCKSTEP_CHECK_OK(logits.status());
  return std::vector<float>(*logits, *logits + tokens.size() * model.config().vocab_size);
}

double RelativeL2(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

TEST(DeepseekTest, LatentCacheHoldsOnlyTheLatentVector) {
  const std::unique_ptr<Transformer> model = Load(ModelDir(true, true));
  const kv::BlockLayout layout = model->Layout(16);
  EXPECT_EQ(layout.num_kv_heads, 1);
  EXPECT_EQ(layout.head_dim, (24 + 8) / 2);
  // 3 layers x (kv_lora_rank 24 + qk_rope_head_dim 8) floats per token.
  EXPECT_EQ(layout.BlockBytes(), 16u * 3 * 32 * sizeof(float));
  EXPECT_EQ(model->config().kv_values_per_token(), 3 * 32);
}

// Both forms over the same cache, with and without q_lora_rank and YaRN, 40 positions
// (past YaRN's original 16): equal up to rounding.
TEST(DeepseekTest, AbsorbedAndExpandedFormsAgree) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const bool q_lora : {true, false}) {
    for (const bool yarn : {true, false}) {
      SCOPED_TRACE(absl::StrCat("q_lora ", q_lora, " yarn ", yarn));
      const std::unique_ptr<Transformer> model = Load(ModelDir(q_lora, yarn));
      const std::vector<int32_t> tokens = RandomTokens(40, rng);
      HostPool pool(model->Layout(8), 64, seed);
      std::vector<BlockId> absorbed_blocks, expanded_blocks;
      model->set_mla_form(MlaForm::kAbsorbed);
      const std::vector<float> absorbed = Forward(*model, pool, absorbed_blocks, 0, tokens);
      model->set_mla_form(MlaForm::kExpanded);
      const std::vector<float> expanded = Forward(*model, pool, expanded_blocks, 0, tokens);
      const double rel = RelativeL2(expanded, absorbed);
      EXPECT_LT(rel, 1e-5);
      EXPECT_GT(rel, 0.0);  // really two computations
      // Decode steps in the expanded form over the cache the absorbed prefill wrote.
      const std::vector<int32_t> next = RandomTokens(1, rng);
      const std::vector<float> decode_expanded = Forward(*model, pool, absorbed_blocks, 40, next);
      model->set_mla_form(MlaForm::kAbsorbed);
      const std::vector<float> decode_absorbed = Forward(*model, pool, expanded_blocks, 40, next);
      EXPECT_LT(RelativeL2(decode_expanded, decode_absorbed), 1e-5);
    }
  }
}

// Prefill in one forward, or in chunks, or token by token: the same bits per position.
TEST(DeepseekTest, PrefillEqualsDecodeBitwise) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::unique_ptr<Transformer> model = Load(ModelDir(true, true));
  const int vocab = model->config().vocab_size;
  const std::vector<int32_t> tokens = RandomTokens(30, rng);
  HostPool pool(model->Layout(4), 64, seed);
  std::vector<BlockId> whole_blocks, step_blocks, chunk_blocks;
  const std::vector<float> whole = Forward(*model, pool, whole_blocks, 0, tokens);
  for (int p = 0; p < 30; ++p) {
    const std::vector<float> one = Forward(*model, pool, step_blocks, p, {tokens[p]});
    ASSERT_EQ(one, std::vector<float>(whole.begin() + p * vocab, whole.begin() + (p + 1) * vocab))
        << "position " << p;
  }
  const std::vector<int32_t> first(tokens.begin(), tokens.begin() + 13);
  const std::vector<int32_t> rest(tokens.begin() + 13, tokens.end());
  Forward(*model, pool, chunk_blocks, 0, first);
  const std::vector<float> tail = Forward(*model, pool, chunk_blocks, 13, rest);
  EXPECT_EQ(tail, std::vector<float>(whole.begin() + 13 * vocab, whole.end()));
}

// Four expert-parallel ranks (each holding 2 of the 8 routed experts and the shared
// expert), each forwarding its own sequence (one none), against one rank: bitwise.
TEST(DeepseekTest, FourRanksEqualOneRankBitwise) {
  constexpr int kRanks = 4;
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = ModelDir(true, true);
  const std::unique_ptr<Transformer> single = Load(dir);
  std::vector<std::unique_ptr<comm::Communicator>> group = comm::MakeInProcessGroup(kRanks);
  std::vector<std::unique_ptr<Transformer>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(Load(dir, ExpertGroup{group[r].get(), r, kRanks, absl::Seconds(30)}));
  }
  std::vector<std::vector<int32_t>> prompts(kRanks);
  for (int r = 1; r < kRanks; ++r) prompts[r] = RandomTokens(5 + 7 * r, rng);
  std::vector<std::vector<float>> logits(kRanks);
  std::vector<std::unique_ptr<HostPool>> pools;
  for (int r = 0; r < kRanks; ++r) {
    pools.push_back(std::make_unique<HostPool>(single->Layout(8), 32, seed + r));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<BlockId> blocks;
      logits[r] = Forward(*ranks[r], *pools[r], blocks, 0, prompts[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  HostPool pool(single->Layout(8), 32, seed);
  for (int r = 1; r < kRanks; ++r) {
    std::vector<BlockId> blocks;
    EXPECT_EQ(logits[r], Forward(*single, pool, blocks, 0, prompts[r])) << "rank " << r;
  }
  EXPECT_EQ(ranks[0]->collectives_per_forward(), 3 * 2);  // two MoE layers
}

}  // namespace
}  // namespace lockstep::engine
