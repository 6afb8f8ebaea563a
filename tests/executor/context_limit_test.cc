// Speculative decoding at the context limit: through the real executor, KV manager and
// CPU engine with a model of 64 positions, requests with prompt + max_tokens equal to
// the limit (ignore_eos) get every token they asked for with every drafter (the draft
// model in a paired and an unpaired pool, n-gram, dynamic K): each step's K stops at
// the model's last position, and the output equals the output without speculation,
// token for token. A batch-mate is unaffected. And when the engine refuses one
// request's sequence, only that request fails; the rest of its batch goes on.
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model_engine.h"
#include "runtime/executor/executor.h"
#include "spec_decode/speculative_config.h"
#include "tests/executor/outcome_sink.h"
#include "tests/executor/solo_executor.h"

namespace lockstep::exec {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kMaxPosition = 64;
constexpr int kTpb = 8;

// The tiny preset with 64 positions, and its draft (written on first use).
const std::string& ShortModelDir() {
  static const std::string* const dir = [] {
    auto config = engine::PresetConfig("tiny");
    LOCKSTEP_CHECK_OK(config.status());
    config->max_position = kMaxPosition;
    auto* path = new std::string(engine::testing::CustomModelDir(*config, "tiny_short"));
    LOCKSTEP_CHECK_OK(engine::WriteModel(engine::DraftConfigFor(*config), *path + "/draft", 1,
                                         engine::DType::kF32, &*config,
                                         engine::kDefaultDraftPerturbation));
    return path;
  }();
  return *dir;
}

struct Mode {
  const char* name;
  spec::Method method;
  kv::DraftMode draft_mode;
  int k;
  bool dynamic;
};

// Wraps the CPU engine; from the `refuse_at`-th generation step of `victim` on, hands
// the engine a block table naming a block outside the pool, which the engine refuses.
class RefusingEngine : public engine::ModelEngine {
 public:
  RefusingEngine(std::unique_ptr<engine::ModelEngine> inner, RequestId victim, int refuse_at)
      : inner_(std::move(inner)), victim_(victim), refuse_at_(refuse_at) {}
  engine::EngineInfo info() const override { return inner_->info(); }
  void Launch(engine::Batch batch) override {
    for (engine::GenerationStep& step : batch.generation) {
      if (step.kv.id == victim_ && ++victim_steps_ >= refuse_at_) {
        step.kv.blocks.front() = BlockId(1 << 20);
      }
    }
    inner_->Launch(std::move(batch));
  }
  absl::StatusOr<engine::BatchResult> Collect(StepId step, absl::Duration timeout) override {
    return inner_->Collect(step, timeout);
  }

 private:
  std::unique_ptr<engine::ModelEngine> inner_;
  RequestId victim_;
  int refuse_at_;
  int victim_steps_ = 0;
};

// One rank over the 64-position model; submits `specs` (ids 1, 2, ...) at once and
// steps until every one finished, auditing after every step. `refuse`: a
// RefusingEngine refuses that request from its third generation step on.
RunOutcomes RunRank(const Mode& mode, std::vector<NewRequestSpec> specs,
                    std::optional<RequestId> refuse = std::nullopt) {
  const std::string dir = ShortModelDir();
  ExecutorConfig config;
  config.instance = "limit";
  config.audit_every_step = true;
  config.scheduler.max_batch_size = 8;
  config.scheduler.max_num_active_requests = 8;
  config.scheduler.max_num_tokens = 256;
  config.scheduler.chunk_size = 16;
  if (mode.method != spec::Method::kNone) {
    config.scheduler.speculative = {
        .method = mode.method, .num_draft_tokens = mode.k, .dynamic = mode.dynamic};
  }
  config.kv.target.layout = *engine::ModelBlockLayout(dir, kTpb);
  config.kv.target.num_blocks = 128;
  config.kv.draft_mode = mode.draft_mode;
  if (mode.method == spec::Method::kDraftModel) {
    config.kv.draft.layout = *engine::ModelBlockLayout(dir + "/draft", kTpb);
    config.kv.draft.num_blocks = 128;
  }
  config.kv.dummy_reserved_tokens = 1 + mode.k;
  OutcomeSink sink;
  EngineWrapper refusing;
  if (refuse.has_value()) {
    refusing = [&](std::unique_ptr<engine::ModelEngine> engine) {
      return std::make_unique<RefusingEngine>(std::move(engine), *refuse, /*refuse_at=*/3);
    };
  }
  SoloExecutor rank = MakeSoloExecutor(config, dir, &sink, refusing);
  std::vector<RequestId> ids;
  RunWave(*rank.executor, sink, std::move(specs), 1000, mode.name, ids);
  return CollectOutcomes(*rank.executor, sink, ids);
}

NewRequestSpec MakeSpec(std::vector<int32_t> prompt, int max_tokens) {
  NewRequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.sampling.max_tokens = max_tokens;
  spec.sampling.ignore_eos = true;
  return spec;
}

// BOS, then `n` - 1 tokens: a short random span repeated (n-gram matches), or random.
std::vector<int32_t> Prompt(std::mt19937_64& rng, int n, bool repeating) {
  std::vector<int32_t> span;
  for (int i = 0; i < (repeating ? 7 : n); ++i) span.push_back(static_cast<int32_t>(rng() % 256));
  std::vector<int32_t> prompt = {engine::kByteBosToken};
  for (int i = 1; i < n; ++i) prompt.push_back(span[static_cast<size_t>(i - 1) % span.size()]);
  return prompt;
}

// Requests at the limit (prompt + max_tokens = 64: a long prompt, a short one, one
// position left after the prompt's last token) and a batch-mate well below it.
std::vector<NewRequestSpec> LimitRequests(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<NewRequestSpec> specs;
  specs.push_back(MakeSpec(Prompt(rng, 40, true), 24));
  specs.push_back(MakeSpec(Prompt(rng, 10, true), 54));
  specs.push_back(MakeSpec(Prompt(rng, 62, false), 2));
  specs.push_back(MakeSpec(Prompt(rng, 20, false), 30));  // the batch-mate: 50 positions
  return specs;
}

class ContextLimitTest : public ::testing::TestWithParam<Mode> {};

TEST_P(ContextLimitTest, RequestsAtTheLimitGetEveryTokenAndEqualNoSpeculation) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const Mode& mode = GetParam();
  const RunOutcomes plain =
      RunRank({"none", spec::Method::kNone, kv::DraftMode::kNone, 0, false}, LimitRequests(seed));
  const RunOutcomes spec = RunRank(mode, LimitRequests(seed));
  const std::vector<NewRequestSpec> specs = LimitRequests(seed);
  ASSERT_EQ(spec.outcomes.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const Outcome& o = spec.outcomes[i];
    EXPECT_TRUE(o.finished) << mode.name << " request " << i;
    EXPECT_THAT(o.status, IsOk()) << mode.name << " request " << i;
    ASSERT_EQ(o.tokens.size(), static_cast<size_t>(specs[i].sampling.max_tokens))
        << mode.name << " request " << i;
    EXPECT_EQ(o.tokens, plain.outcomes[i].tokens) << mode.name << " request " << i;
  }
  for (const RunOutcomes* r : {&plain, &spec}) {
    EXPECT_EQ(r->counters.engine_failures, 0);
    EXPECT_EQ(r->counters.failed, 0);
    EXPECT_EQ(r->counters.audit_violations, 0);
  }
  EXPECT_GT(spec.counters.drafts_accepted, 0) << "speculation ran";
  if (!mode.dynamic) {
    // Not vacuous: with a fixed K only the position cap makes a step verify fewer.
    int64_t capped = 0;
    for (int k = 0; k < mode.k; ++k) capped += spec.counters.draft_k_steps[static_cast<size_t>(k)];
    EXPECT_GT(capped, 0) << "steps near the limit ran with fewer drafts";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Drafters, ContextLimitTest,
    ::testing::Values(
        Mode{"draft_model_paired", spec::Method::kDraftModel, kv::DraftMode::kPaired, 3, false},
        Mode{"draft_model_unpaired", spec::Method::kDraftModel, kv::DraftMode::kUnpaired, 4, false},
        Mode{"draft_model_dynamic", spec::Method::kDraftModel, kv::DraftMode::kPaired, 4, true},
        Mode{"ngram", spec::Method::kNgram, kv::DraftMode::kNone, 3, false},
        Mode{"ngram_dynamic", spec::Method::kNgram, kv::DraftMode::kNone, 4, true}),
    [](const ::testing::TestParamInfo<Mode>& info) { return std::string(info.param.name); });

// The engine refuses one request's sequence mid-generation: that request fails with a
// status naming it and why; its batch-mates finish exactly as without the refusal.
TEST(EngineRefusalTest, OnlyTheRefusedRequestFails) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const Mode mode{"draft_model", spec::Method::kDraftModel, kv::DraftMode::kPaired, 3, false};
  std::mt19937_64 rng(seed);
  std::vector<NewRequestSpec> specs;
  for (int i = 0; i < 4; ++i) specs.push_back(MakeSpec(Prompt(rng, 12 + 5 * i, i % 2 == 0), 16));
  const RunOutcomes clean = RunRank(mode, specs);
  const RequestId victim(2);  // the second request
  const RunOutcomes refused = RunRank(mode, specs, victim);
  for (size_t i = 0; i < specs.size(); ++i) {
    const Outcome& o = refused.outcomes[i];
    EXPECT_TRUE(o.finished) << "request " << i;
    if (RequestId(static_cast<int64_t>(i) + 1) == victim) {
      EXPECT_THAT(o.status,
                  StatusIs(absl::StatusCode::kInternal,
                           AllOf(HasSubstr("refused request 2"), HasSubstr("outside the pool"))));
      EXPECT_LT(o.tokens.size(), 16u);
      continue;
    }
    EXPECT_THAT(o.status, IsOk()) << "request " << i;
    EXPECT_EQ(o.tokens, clean.outcomes[i].tokens) << "request " << i;
  }
  EXPECT_EQ(refused.counters.failed, 1);
  EXPECT_EQ(refused.counters.engine_failures, 0) << "no batch failed as a whole";
  EXPECT_EQ(refused.counters.audit_violations, 0);
}

}  // namespace
}  // namespace lockstep::exec
