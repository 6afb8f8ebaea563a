// The pad dummy after the schedule (docs/design.md §3 step 5), and the dummy's place in the
// counts that balance ranks (docs/executor-edge-cases.md, "Padding and veto").
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/executor/cluster.h"
#include "tests/executor/scenario.h"

namespace lockstep::testing {
namespace {

struct PostPadCase {
  std::string name;
  sched::DummyPolicy policy;
  int32_t max_active;
  std::vector<int> to_complete_prompts;  // rank 0's one-token requests, prefilled first
  int blocked_prompt;                    // rank 0's next request: its first chunk won't fit
  bool forced_veto;                      // rank 1 vetoes the step of the pad decision
  exec::PadSource source;
  exec::PadRefusal refusal;
};

void PrintTo(const PostPadCase& c, std::ostream* os) { *os << c.name; }

class PostSchedulePadTest : public ::testing::TestWithParam<PostPadCase> {};

// Rank 0 holds one-token requests that are in flight (not schedulable) and a request
// that is schedulable but whose first chunk finds too few blocks: the schedule takes
// nothing, so the post-schedule pad decides whether rank 0 forwards or vetoes.
TEST_P(PostSchedulePadTest, RankThatSchedulesNothing) {
  const PostPadCase& p = GetParam();
  ClusterOptions o = Base(2);
  o.scheduler.dummy_policy = p.policy;
  o.scheduler.max_num_active_requests = p.max_active;
  o.num_blocks = 16;  // 64 tokens
  if (p.forced_veto) o.faults = {VetoAt(1, 1)};
  ScriptedCluster c(o);
  std::vector<exec::NewRequestSpec> specs;
  int64_t id = 1;
  for (int prompt : p.to_complete_prompts) specs.push_back(c.MakeRequest(id++, prompt, 1, 0));
  specs.push_back(c.MakeRequest(id++, p.blocked_prompt, 1, 0));
  specs.push_back(c.MakeRequest(id++, 4, 10, 1));
  for (const auto& s : specs) c.Submit(s);

  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 0: the first requests prefill
  ASSERT_EQ(c.rank(0).step_stats().last().scheduled_context,
            static_cast<int>(p.to_complete_prompts.size()));
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 1: the pad decision
  const exec::StepStats s = c.rank(0).step_stats().last();
  EXPECT_EQ(s.pad_source, p.source);
  EXPECT_EQ(s.pad_refusal, p.refusal);
  const bool pads = p.source == exec::PadSource::kAfterSchedule;
  EXPECT_EQ(s.vetoed, !pads || p.forced_veto);
  EXPECT_EQ(s.padded, pads && !p.forced_veto);  // forwarded only the dummy
  EXPECT_EQ(c.rank(0).counters().dummies_created, pads ? 1 : 0);
  // The blocked first chunk holds nothing: its cache was released in the same pass.
  EXPECT_FALSE(c.rank(0).kv().Has(specs[p.to_complete_prompts.size()].id, kv::PoolKind::kTarget));
  // Forwarded or rolled back, the dummy is gone (the audit also compared the pools of
  // a vetoed step with the state before its schedule).
  EXPECT_FALSE(c.rank(0).kv().Has(c.rank(0).kv().dummy_id(), kv::PoolKind::kTarget));

  RunToEnd(c, static_cast<int64_t>(specs.size()));
  ExpectBaseline(c);
  for (const auto& spec : specs) {
    EXPECT_EQ(c.stream(spec.id).tokens, c.ExpectedTokens(spec)) << spec.id;
  }
}

// 16 blocks. 40 + 28 tokens need 10 + 7 blocks: the 28-token prompt waits for the first
// request to finish. Reserved keeps one block aside, compat takes the dummy's block
// from the 6 free ones; 32 + 32 tokens leave none at all.
INSTANTIATE_TEST_SUITE_P(Cases, PostSchedulePadTest,
                         ::testing::Values(PostPadCase{"reserved_pads",
                                                       sched::DummyPolicy::kReserved,
                                                       4,
                                                       {40},
                                                       28,
                                                       false,
                                                       exec::PadSource::kAfterSchedule,
                                                       exec::PadRefusal::kNone},
                                           PostPadCase{"compat_pads_from_free_blocks",
                                                       sched::DummyPolicy::kCompat,
                                                       4,
                                                       {40},
                                                       28,
                                                       false,
                                                       exec::PadSource::kAfterSchedule,
                                                       exec::PadRefusal::kNone},
                                           PostPadCase{"reserved_pad_rolled_back_by_a_veto",
                                                       sched::DummyPolicy::kReserved,
                                                       4,
                                                       {40},
                                                       28,
                                                       true,
                                                       exec::PadSource::kAfterSchedule,
                                                       exec::PadRefusal::kNone},
                                           PostPadCase{"compat_refused_at_the_cap",
                                                       sched::DummyPolicy::kCompat,
                                                       2,
                                                       {40},
                                                       28,
                                                       false,
                                                       exec::PadSource::kNone,
                                                       exec::PadRefusal::kAtCap},
                                           PostPadCase{"compat_refused_without_kv",
                                                       sched::DummyPolicy::kCompat,
                                                       4,
                                                       {32, 32},
                                                       4,
                                                       false,
                                                       exec::PadSource::kNone,
                                                       exec::PadRefusal::kNoKv}),
                         [](const auto& info) { return info.param.name; });

// Checklist: rank balance and caps count real requests only. One request slot per rank:
// rank 0's is taken, rank 1 pads every step. A new request goes to rank 1 (were its
// dummy counted, rank 1 would be full too and the request would wait at the leader).
TEST(PaddingTest, DummyIsNotCountedAsARequest) {
  auto dummy = sched::Request::MakeDummy(RequestId(-1), absl::UnixEpoch());
  std::vector<sched::Request*> active = {dummy.get()};
  EXPECT_EQ(sched::Scheduler::CountActive(active), 0);
  EXPECT_EQ(sched::Scheduler::CountSchedulable(active), 0);

  ClusterOptions o = Base(2);
  o.scheduler.max_num_active_requests = 1;
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 4, 40, 0);
  c.Submit(a);
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  ASSERT_TRUE(c.rank(1).step_stats().last().padded);
  EXPECT_EQ(c.rank(1).Snapshot().active_requests, 0);
  EXPECT_EQ(c.rank(0).Snapshot().active_requests, 1);
  auto b = c.MakeRequest(2, 4, 4);  // not pinned
  c.Submit(b);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  EXPECT_EQ(c.rank(0).queued_requests(), 0);
  EXPECT_EQ(c.rank(1).LiveIds(), std::vector<RequestId>{b.id});
  RunToEnd(c, 2);
  ExpectBaseline(c);
}

}  // namespace
}  // namespace lockstep::testing
