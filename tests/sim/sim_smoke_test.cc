#include "gtest/gtest.h"
#include "runtime/sim/sim_cluster.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sim {
namespace {

TEST(SimSmokeTest, AggregatedTwoRanks) {
  SimConfig c;
  c.ranks = 2;
  c.workload.num_requests = 50;
  SimSummary s = RunSimulation(c);
  EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
  EXPECT_EQ(s.completed, 50) << s.ToString();
  std::cerr << s.ToString() << "\n";
}

// Multi-turn conversations over a shared system prompt, follow-ups hinted to the rank
// that answered their previous turn, an unpaired draft pool: every turn correct, the
// audit clean every step, and most of the follow-ups' prompts reused.
TEST(SimSmokeTest, MultiTurnConversationsReuseTheirPrefixes) {
  SimConfig c;
  c.ranks = 2;
  c.scheduler.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 3};
  c.draft_mode = kv::DraftMode::kUnpaired;
  c.workload.conversations = 6;
  c.workload.min_turns = 3;
  c.workload.max_turns = 4;
  c.workload.system_prompt = 64;
  c.workload.min_prompt = 4;
  c.workload.max_prompt = 24;
  c.workload.hint_followups = true;
  const SimSummary s = RunSimulation(c);
  EXPECT_TRUE(s.ok()) << c.ToString() << "\n" << s.ToString();
  EXPECT_EQ(s.completed, s.requests) << s.ToString();
  EXPECT_GE(s.requests, 18);
  EXPECT_GT(s.reused_tokens, s.context_tokens / 2) << s.ToString();
  EXPECT_GT(s.mirror_reused_tokens, 0) << s.ToString();
  std::cerr << s.ToString() << "\n";
}

}  // namespace
}  // namespace lockstep::sim
