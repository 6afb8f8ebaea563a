// Constrained decoding through the BatchRunner with the grammar masks computed during
// the target forward (GrammarMaskWorker) and after it on the engine thread: over random
// JSON schemas at temperature 1 with random logits, every request's tokens and status
// are the same both ways, and a hook in the (fake) forward shows that with the overlap
// the worker computed every sampling sequence's mask while the forward ran.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/testing/seed.h"
#include "grammar/grammar_spec.h"
#include "grammar/matcher.h"
#include "grammar/testing_schemas.h"
#include "grammar/testing_vocabulary.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/batch_runner.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/sampler_grammar.h"
#include "runtime/engine/model_engine.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kVocab = 1500;
constexpr int kTokensPerBlock = 16;
constexpr int kBlocksPerRequest = 32;  // 512 positions
constexpr int kRequests = 8;
constexpr int kMaxTokens = 200;

// Logits ~ a hash of (seed, sequence, position, token) in [-4, 4): random, and the same
// for the same batch. `hook` runs inside every Forward.
class RandomLogitsModel final : public ForwardModel {
 public:
  RandomLogitsModel(uint64_t seed, int32_t eos) : seed_(seed) {
    config_.vocab_size = kVocab;
    config_.num_layers = 1;
    config_.num_kv_heads = 1;
    config_.head_dim = 1;
    config_.max_position = kTokensPerBlock * kBlocksPerRequest;
    config_.eos_token_id = eos;
  }
  const ModelConfig& config() const override { return config_; }
  kv::BlockLayout Layout(int tokens_per_block) const override {
    return kv::BlockLayout{1, 1, 1, tokens_per_block};
  }
  absl::StatusOr<const float*> Forward(const ForwardInput& input, const KvPoolView& /*pool*/,
                                       Arena& arena, ThreadPool* /*threads*/) const override {
    if (hook) hook();
    float* logits = arena.Alloc<float>(input.logit_rows.size() * kVocab);
    for (size_t j = 0; j < input.logit_rows.size(); ++j) {
      const ForwardRow& row = input.rows[input.logit_rows[j]];
      uint64_t h = seed_ ^ (static_cast<uint64_t>(row.seq) << 48) ^
                   (static_cast<uint64_t>(row.position) << 20) ^ static_cast<uint32_t>(row.token);
      for (int t = 0; t < kVocab; ++t) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        logits[j * kVocab + t] = static_cast<float>(h >> 40) / (1 << 21) - 4.0f;
      }
    }
    return logits;
  }
  void CopyKv(const KvPoolView&, const SequenceKv&, const SequenceKv&, int64_t,
              int64_t) const override {}
  int collectives_per_forward() const override { return 0; }

  std::function<void()> hook;

 private:
  const uint64_t seed_;
  ModelConfig config_;
};

struct Output {
  std::vector<int32_t> tokens;
  absl::Status status;
};

struct Generated {
  std::vector<Output> outputs;
  int64_t masks_during_forward = 0;  // masks the worker completed, seen from the forward
  int64_t constrained_samples = 0;   // sampling sequences of the forwards
};

// Generates kRequests requests under `schemas` until each stops (EOS, an error or
// kMaxTokens), one BatchRunner step at a time.
Generated Generate(uint64_t seed, const std::vector<std::string>& schemas, bool overlap) {
  const std::shared_ptr<const grammar::Vocabulary> vocabulary =
      grammar::MakeTestingVocabulary(kVocab, static_cast<uint32_t>(seed));
  const int32_t eos = kVocab - 1;
  RandomLogitsModel model(seed, eos);
  const KvPoolView pool{nullptr, model.Layout(kTokensPerBlock), kRequests * kBlocksPerRequest};
  BatchRunner runner(&model, pool, nullptr, KvPoolView{}, 0, nullptr);
  GrammarSource source(vocabulary);
  runner.set_grammar_source(&source);
  runner.set_mask_overlap(overlap);

  Generated run;
  run.outputs.resize(kRequests);
  int sampling_now = 0;  // constrained sequences that sample in the forward being run
  model.hook = [&] {
    EXPECT_TRUE(runner.mask_worker().AwaitWorkerIdle(absl::Seconds(60)));
    run.masks_during_forward += runner.mask_worker().completed_by_worker();
    run.constrained_samples += sampling_now;
  };
  auto refs = [&](int r) {
    kv::BlockRefs kv;
    kv.id = RequestId(r + 1);
    kv.generation = 1;
    for (int b = 0; b < kBlocksPerRequest; ++b) {
      kv.blocks.push_back(BlockId(r * kBlocksPerRequest + b));
    }
    return kv;
  };
  auto sampling = [&](int r) {
    sched::SamplingParams p;
    p.temperature = 1.0f;
    p.seed = seed + r;
    p.max_tokens = kMaxTokens;
    p.grammar = grammar::GrammarSpec{grammar::GrammarSpec::Kind::kJsonSchema, schemas[r]};
    return p;
  };
  Batch batch;
  batch.step = StepId(0);
  for (int r = 0; r < kRequests; ++r) {
    ContextChunk chunk;
    chunk.kv = refs(r);
    chunk.tokens = {static_cast<int32_t>(r), 7, 11, 13};
    chunk.last_chunk = true;
    chunk.sampling = sampling(r);
    batch.context.push_back(std::move(chunk));
  }
  std::vector<bool> running(kRequests, true);
  for (int step = 0;; ++step) {
    sampling_now = static_cast<int>(batch.context.size() + batch.generation.size());
    absl::StatusOr<BatchResult> result = runner.Run(batch);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return run;
    Batch next;
    next.step = StepId(step + 1);
    for (const SequenceResult& out : result->sequences) {
      const int r = static_cast<int>(out.id.value()) - 1;
      Output& o = run.outputs[r];
      o.status = out.status;
      o.tokens.insert(o.tokens.end(), out.tokens.begin(), out.tokens.end());
      if (!out.status.ok() || o.tokens.back() == eos ||
          static_cast<int>(o.tokens.size()) >= kMaxTokens) {
        running[r] = false;
        next.released.push_back(refs(r));
        continue;
      }
      GenerationStep g;
      g.kv = refs(r);
      g.sampling = sampling(r);
      next.generation.push_back(std::move(g));
    }
    if (next.generation.empty()) break;
    batch = std::move(next);
  }
  return run;
}

TEST(GrammarOverlapTest, MasksDuringTheForwardSampleTheSameTokens) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    std::vector<std::string> schemas;
    for (int r = 0; r < kRequests; ++r) {
      schemas.push_back(grammar::RandomSchema(static_cast<uint32_t>(seed + 100 * round + r)));
    }
    const Generated after = Generate(seed + round, schemas, /*overlap=*/false);
    const Generated during = Generate(seed + round, schemas, /*overlap=*/true);
    int stopped = 0;
    for (int r = 0; r < kRequests; ++r) {
      SCOPED_TRACE(absl::StrCat("request ", r, " schema ", schemas[r]));
      EXPECT_EQ(during.outputs[r].tokens, after.outputs[r].tokens);
      EXPECT_EQ(during.outputs[r].status, after.outputs[r].status);
      // Random schemas have no dead end: every token sampled was one the grammar allows.
      EXPECT_TRUE(after.outputs[r].status.ok()) << after.outputs[r].status;
      if (after.outputs[r].status.ok() && after.outputs[r].tokens.back() == kVocab - 1) ++stopped;
    }
    EXPECT_GT(stopped, 0);
    EXPECT_GT(during.constrained_samples, 0);
    // Every constrained sequence's mask was computed by the worker during the forward.
    EXPECT_EQ(during.masks_during_forward, during.constrained_samples);
    EXPECT_EQ(after.masks_during_forward, 0);
  }
}

}  // namespace
}  // namespace lockstep::engine
