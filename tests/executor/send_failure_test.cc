// A context rank whose KV send cannot start (the transceiver refuses it, or there is
// none) fails that request with a clear status, frees its KV, and keeps stepping.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/executor/cluster.h"

namespace lockstep::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

ClusterOptions ContextCluster() {
  ClusterOptions o;
  o.ranks = 2;
  o.role = sched::InstanceRole::kContext;
  o.scheduler.max_batch_size = 4;
  o.scheduler.max_num_active_requests = 4;
  o.scheduler.max_num_tokens = 128;
  o.scheduler.prefix_reuse = false;
  return o;
}

// The context leg of a request ended: a handle to its KV, or a final answer.
bool LegEnded(const Stream& s) { return s.finished || s.context.has_value(); }

// Steps until every leg in `ids` ended, checking the audit after every step; every
// step must succeed (a refused send must not stop a rank).
void RunLegs(ScriptedCluster& c, const std::vector<RequestId>& ids, int max_steps = 500) {
  auto ended = [&] {
    for (RequestId id : ids) {
      if (!LegEnded(c.stream(id))) return false;
    }
    return true;
  };
  for (int i = 0; i < max_steps && !ended(); ++i) {
    ASSERT_TRUE(c.StepAll().ok()) << "step " << c.steps();
    ASSERT_THAT(c.AuditAll(), IsEmpty()) << "step " << c.steps();
  }
  ASSERT_TRUE(ended()) << "legs not ended after " << max_steps << " steps";
}

// Steps until no rank holds a request or a claim, then checks the pools are empty.
void ExpectReleased(ScriptedCluster& c) {
  auto empty = [&] {
    for (int r = 0; r < c.ranks(); ++r) {
      if (!c.rank(r).LiveIds().empty() || !c.rank(r).ClaimedIds().empty()) return false;
    }
    return true;
  };
  ASSERT_TRUE(c.StepUntil(empty, 200));
  for (int r = 0; r < c.ranks(); ++r) {
    const kv::ManagerStats s = c.rank(r).kv().Stats();
    EXPECT_EQ(s.target.used_blocks, 0) << "rank " << r;
    EXPECT_EQ(s.target.num_caches, 0) << "rank " << r;
  }
}

TEST(SendFailureTest, RefusedSendFailsTheRequestAndTheRankGoesOn) {
  ClusterOptions o = ContextCluster();
  o.refuse_send = [](RequestId id) { return id == RequestId(2); };
  ScriptedCluster c(o);
  const exec::NewRequestSpec ok0 = c.MakeRequest(1, 12, 8, 0);
  const exec::NewRequestSpec refused = c.MakeRequest(2, 12, 8, 1);
  const exec::NewRequestSpec ok1 = c.MakeRequest(3, 9, 8, 1);
  c.Submit(ok0);
  c.Submit(refused);
  c.Submit(ok1);
  ASSERT_NO_FATAL_FAILURE(RunLegs(c, {ok0.id, refused.id, ok1.id}));

  const Stream s = c.stream(refused.id);
  EXPECT_TRUE(s.finished);
  EXPECT_EQ(s.num_finished, 1);  // answered once, not once per failure path
  EXPECT_EQ(s.reason, sched::FinishReason::kError);
  EXPECT_FALSE(s.context.has_value());
  EXPECT_EQ(s.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.status.message()), HasSubstr("KV send of request 2 could not start"));
  EXPECT_THAT(std::string(s.status.message()), HasSubstr("injected send refusal"));
  EXPECT_EQ(s.tokens, std::vector<int32_t>{c.ExpectedTokens(refused).front()});
  // Its KV went back at once: no claim holds it.
  EXPECT_FALSE(c.rank(1).kv().Has(refused.id, kv::PoolKind::kTarget));
  EXPECT_THAT(c.rank(1).ClaimedIds(), ::testing::Not(::testing::Contains(refused.id)));
  EXPECT_EQ(c.rank(1).counters().failed, 1);
  EXPECT_EQ(c.rank(1).counters().transfer_failures, 1);

  for (const auto& spec : {ok0, ok1}) {
    const Stream ok = c.stream(spec.id);
    ASSERT_TRUE(ok.context.has_value()) << spec.id;
    EXPECT_FALSE(ok.finished) << spec.id;
    EXPECT_EQ(ok.context->first_token, c.ExpectedTokens(spec).front()) << spec.id;
  }

  // The rank keeps serving: a later request on it hands off its KV as usual.
  const exec::NewRequestSpec later = c.MakeRequest(4, 7, 8, 1);
  c.Submit(later);
  ASSERT_NO_FATAL_FAILURE(RunLegs(c, {later.id}));
  EXPECT_TRUE(c.stream(later.id).context.has_value());
  ASSERT_NO_FATAL_FAILURE(ExpectReleased(c));
  EXPECT_THAT(c.AuditAll(), IsEmpty());
}

TEST(SendFailureTest, NoTransceiverFailsTheRequestAndTheRankGoesOn) {
  ClusterOptions o = ContextCluster();
  o.with_transceiver = false;
  ScriptedCluster c(o);
  const exec::NewRequestSpec a = c.MakeRequest(1, 12, 8, 0);
  const exec::NewRequestSpec b = c.MakeRequest(2, 5, 8, 1);
  c.Submit(a);
  c.Submit(b);
  ASSERT_NO_FATAL_FAILURE(RunLegs(c, {a.id, b.id}));
  for (const auto& spec : {a, b}) {
    const Stream s = c.stream(spec.id);
    EXPECT_EQ(s.num_finished, 1) << spec.id;
    EXPECT_EQ(s.reason, sched::FinishReason::kError) << spec.id;
    EXPECT_EQ(s.status.code(), absl::StatusCode::kFailedPrecondition) << spec.id;
    EXPECT_THAT(std::string(s.status.message()), HasSubstr("no KV transfer")) << spec.id;
  }
  ASSERT_NO_FATAL_FAILURE(ExpectReleased(c));
  EXPECT_THAT(c.AuditAll(), IsEmpty());
}

}  // namespace
}  // namespace lockstep::testing
