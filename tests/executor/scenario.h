// Helpers shared by the executor scenario tests: small cluster configurations, a run to
// the end with the audit after every step, the baseline (every pool empty) at the end,
// and a search of a rank's per-step facts.
#ifndef LOCKSTEP_TESTS_EXECUTOR_SCENARIO_H_
#define LOCKSTEP_TESTS_EXECUTOR_SCENARIO_H_

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/faulty_communicator.h"
#include "spec_decode/speculative_config.h"
#include "tests/executor/cluster.h"

namespace lockstep::testing {

inline ClusterOptions Base(int ranks, sched::InstanceRole role = sched::InstanceRole::kAggregated) {
  ClusterOptions o;
  o.ranks = ranks;
  o.role = role;
  o.scheduler.max_batch_size = 4;
  o.scheduler.max_num_active_requests = 4;
  o.scheduler.max_num_tokens = 128;
  o.scheduler.prefix_reuse = false;
  o.tokens_per_block = 4;
  o.num_blocks = 64;
  return o;
}

inline ClusterOptions WithDraft(ClusterOptions o, kv::DraftMode mode, int k = 3) {
  o.scheduler.speculative = {.method = k > 0 ? spec::Method::kDraftModel : spec::Method::kNone,
                             .num_draft_tokens = k};
  o.draft_mode = mode;
  return o;
}

// `rank` reports an empty batch at its `step`-th vote: the fleet vetoes that step.
inline comm::FaultRule VetoAt(int rank, int64_t step) {
  return comm::FaultRule::Mutate(rank, "vote", step, [](absl::Span<int64_t> v) { v[0] = 1; });
}

// One step on every rank, then the audit of every rank (executors run with
// audit_every_step, so it includes the pools across an unforwarded step).
inline void StepAudited(ScriptedCluster& c) {
  ASSERT_TRUE(c.StepAll().ok()) << "step " << c.steps();
  ASSERT_THAT(c.AuditAll(), ::testing::IsEmpty()) << "step " << c.steps();
}

// Steps until every submitted request finished, checking the audit after every step.
inline void RunToEnd(ScriptedCluster& c, int64_t expected, int max_steps = 2000) {
  for (int i = 0; i < max_steps && !c.AllFinished(expected); ++i) {
    ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  }
  ASSERT_TRUE(c.AllFinished(expected)) << "not finished after " << max_steps << " steps";
}

inline void ExpectBaseline(ScriptedCluster& c) {
  for (int r = 0; r < c.ranks(); ++r) {
    const kv::ManagerStats s = c.rank(r).kv().Stats();
    EXPECT_EQ(s.target.used_blocks, 0) << "rank " << r;
    EXPECT_EQ(s.target.num_caches, 0) << "rank " << r;
    if (s.draft) {
      EXPECT_EQ(s.draft->used_blocks, 0) << "rank " << r;
    }
  }
}

// The first step of `rank` (still in its stats ring) for which `match` holds.
template <typename Match>
std::optional<exec::StepStats> FirstStep(ScriptedCluster& c, int rank, Match match) {
  for (const exec::StepStats& s : c.rank(rank).step_stats().Snapshot()) {
    if (match(s)) return s;
  }
  return std::nullopt;
}

}  // namespace lockstep::testing

#endif  // LOCKSTEP_TESTS_EXECUTOR_SCENARIO_H_
