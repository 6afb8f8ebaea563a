// The MTP drafter's passes under the step's vote (spec::StepShape): with a vote and no
// context chunk on any rank, passes j > 0 run under the vote's agreement (the same on
// every rank: an expert-parallel device sizes their exchanges from it and may replay a
// graph) and never have more rows than it allows; pass 0, a step with a context chunk
// somewhere, and a step nobody voted on agree their own rows. The module is the CPU
// engine's MTP layer of make-model's tiny-dsv3-mtp, recorded by a wrapper.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/mtp_drafter.h"
#include "runtime/engine/cpu/mtp_module.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "spec_decode/drafter.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;

constexpr int kTokensPerBlock = 4;
constexpr int kK = 3;

// The module, recording each pass's rows and agreement.
class RecordingMtp final : public MtpModel {
 public:
  struct Pass {
    int64_t rows = 0;
    StepAgreement agreement;
  };

  explicit RecordingMtp(const MtpModel* module) : module_(module) {}

  const ForwardModel& layer() const override { return module_->layer(); }
  int hidden_size() const override { return module_->hidden_size(); }
  int vocab_size() const override { return module_->vocab_size(); }
  int collectives_per_forward() const override { return module_->collectives_per_forward(); }
  absl::StatusOr<const float*> Forward(const ForwardInput& input, const float* previous_hidden,
                                       float* hidden_out, const KvPoolView& pool, Arena& arena,
                                       ThreadPool* threads) const override {
    passes_.push_back({static_cast<int64_t>(input.rows.size()), input.agreement});
    return module_->Forward(input, previous_hidden, hidden_out, pool, arena, threads);
  }

  std::vector<Pass> Take() { return std::exchange(passes_, {}); }

 private:
  const MtpModel* const module_;
  mutable std::vector<Pass> passes_;
};

// Two sequences: a prefill of `prompt` tokens each, then decode steps.
class MtpDrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::PresetModelDir("tiny-dsv3-mtp");
    absl::StatusOr<std::unique_ptr<MtpModule>> module = MtpModule::Load(dir, ExpertGroup{});
    ASSERT_THAT(module, IsOk());
    module_ = *std::move(module);
    absl::StatusOr<kv::BlockLayout> layout = MtpModule::BlockLayout(dir, kTokensPerBlock);
    ASSERT_THAT(layout, IsOk());
    pool_ = std::make_unique<testing::HostPool>(*layout, 64, 5);
    recording_ = std::make_unique<RecordingMtp>(module_.get());
    drafter_ = std::make_unique<MtpDrafter>(recording_.get(), pool_->view(), kK, nullptr);
    for (Seq& s : seqs_) {
      s.state = drafter_->NewState();
      ASSERT_THAT(pool_->Cover(s.blocks, 64), IsOk());
    }
  }

  struct Seq {
    std::unique_ptr<spec::DraftSequenceState> state;
    std::vector<BlockId> blocks;
    std::vector<int32_t> tokens;  // this step's
    int64_t start = 0;
  };

  // One Propose over both sequences, each with `tokens` from its start on (the last
  // sampled); the sequences move on by all but the last of them.
  std::vector<RecordingMtp::Pass> Step(const spec::StepShape& shape,
                                       const std::vector<std::vector<int32_t>>& tokens) {
    std::vector<spec::DraftQuery> queries;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      Seq& s = seqs_[i];
      s.tokens = tokens[i];
      spec::DraftQuery q;
      q.tokens = s.tokens;
      q.max_drafts = kK;
      q.first_position = s.start;
      q.kv_generation = 1 + i;
      q.kv_blocks = s.blocks;
      q.kv_limit = s.start + static_cast<int64_t>(s.tokens.size()) + kK;
      q.state = s.state.get();
      queries.push_back(q);
    }
    std::vector<std::vector<int32_t>> drafts(queries.size());
    drafter_->SetStepShape(shape);
    EXPECT_THAT(drafter_->Propose(queries, absl::MakeSpan(drafts)), IsOk());
    for (size_t i = 0; i < seqs_.size(); ++i) {
      EXPECT_EQ(static_cast<int>(drafts[i].size()), kK);
      seqs_[i].start += static_cast<int64_t>(tokens[i].size()) - 1;
    }
    return recording_->Take();
  }

  std::unique_ptr<MtpModule> module_;
  std::unique_ptr<testing::HostPool> pool_;
  std::unique_ptr<RecordingMtp> recording_;
  std::unique_ptr<MtpDrafter> drafter_;
  std::array<Seq, 2> seqs_;
};

TEST_F(MtpDrafterTest, PassesAfterTheFirstRunUnderTheVoteOfADecodeStep) {
  // Prefill: a context chunk on some rank, so no pass runs under the vote.
  for (const RecordingMtp::Pass& p :
       Step({.agreed = true, .any_context = true, .max_target_rows = 12},
            {{40, 41, 42, 43, 44, 45}, {50, 51, 52, 53, 54}})) {
    EXPECT_FALSE(p.agreement.agreed);
  }
  // Decode steps: each sequence verified K drafts (its target forward had 1 + K rows:
  // 8 on this rank, the vote's most may be more) and kept some.
  const spec::StepShape decode{.agreed = true, .any_context = false, .max_target_rows = 8};
  const std::vector<std::vector<std::vector<int32_t>>> steps = {
      {{45, 60}, {54, 61, 62, 63, 64}},  // none accepted / all K accepted
      {{60, 70, 71}, {64, 72}},
  };
  for (const auto& tokens : steps) {
    const std::vector<RecordingMtp::Pass> passes = Step(decode, tokens);
    ASSERT_EQ(static_cast<int>(passes.size()), kK);
    EXPECT_FALSE(passes[0].agreement.agreed) << "pass 0 agrees its own rows";
    for (int j = 1; j < kK; ++j) {
      SCOPED_TRACE(j);
      EXPECT_TRUE(passes[j].agreement.agreed);
      EXPECT_FALSE(passes[j].agreement.any_context);
      EXPECT_EQ(passes[j].agreement.max_rows, 8);
      EXPECT_EQ(passes[j].rows, 2) << "one row per proposing sequence";
      EXPECT_LE(passes[j].rows, passes[j].agreement.max_rows);
    }
  }
  // A step nobody voted on (one rank): every pass agrees its own rows.
  for (const RecordingMtp::Pass& p : Step(spec::StepShape{}, {{71, 80}, {72, 81}})) {
    EXPECT_FALSE(p.agreement.agreed);
    EXPECT_EQ(p.agreement.max_rows, p.rows);
  }
}

}  // namespace
}  // namespace lockstep::engine
