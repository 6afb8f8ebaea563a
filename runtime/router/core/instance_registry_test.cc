#include "runtime/router/core/instance_registry.h"

#include "common/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/prefix_hash.h"
#include "runtime/router/routing/kv_routing.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

config::InstanceConfig Configured(const std::string& name, InstanceRole role,
                                  const std::string& address = "") {
  config::InstanceConfig instance;
  instance.name = name;
  instance.role = role;
  instance.world_size = 2;
  instance.leader_address = address;
  return instance;
}

class InstanceRegistryTest : public ::testing::Test {
 protected:
  InstanceRegistry::Options Options(
      config::RoutingPolicy policy = config::RoutingPolicy::kRoundRobin) {
    return {.model = "tiny", .policy = policy, .heartbeat_timeout = absl::Seconds(2)};
  }
  InstanceState StateOf(const InstanceRegistry& registry, const std::string& name) {
    for (const InstanceState& s : registry.Snapshot()) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << "no instance " << name;
    return {};
  }
  InstanceTarget TargetOf(const InstanceRegistry& registry, const std::string& name) {
    for (const InstanceTarget& t : registry.PollTargets()) {
      if (t.name == name) return t;
    }
    ADD_FAILURE() << "no poll target " << name;
    return {};
  }
  FakeClock clock_;
};

TEST_F(InstanceRegistryTest, ConfiguredInstancesWaitForRegistration) {
  InstanceRegistry registry(Options(), {Configured("agg0", InstanceRole::kAggregated)}, clock_);
  EXPECT_EQ(StateOf(registry, "agg0").health, InstanceHealth::kUnknown);
  EXPECT_THAT(registry.Acquire(InstanceRole::kAggregated),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no healthy aggregated")));
  EXPECT_TRUE(registry.PollTargets().empty());  // no address yet

  LOCKSTEP_ASSERT_OK(
      registry.Register("agg0", InstanceRole::kAggregated, 2, "127.0.0.1:5", "tiny"));
  EXPECT_EQ(StateOf(registry, "agg0").health, InstanceHealth::kHealthy);
  absl::StatusOr<InstanceTarget> target = registry.Acquire(InstanceRole::kAggregated);
  ASSERT_THAT(target, IsOk());
  EXPECT_EQ(target->address, "127.0.0.1:5");
  EXPECT_EQ(StateOf(registry, "agg0").in_flight, 1);
  registry.Release("agg0");
  EXPECT_EQ(StateOf(registry, "agg0").in_flight, 0);
}

TEST_F(InstanceRegistryTest, RegistrationIsChecked) {
  InstanceRegistry registry(Options(), {Configured("ctx0", InstanceRole::kContext)}, clock_);
  EXPECT_THAT(registry.Register("ctx0", InstanceRole::kGeneration, 2, "127.0.0.1:5", "tiny"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the config says role context world_size 2")));
  EXPECT_THAT(registry.Register("x", InstanceRole::kContext, 1, "127.0.0.1:5", "other"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("serves model 'tiny', the instance serves 'other'")));
  EXPECT_THAT(registry.Register("x", InstanceRole::kContext, 1, "nowhere", "tiny"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("leader_address")));
  EXPECT_THAT(registry.Register("x", InstanceRole::kContext, 0, "127.0.0.1:5", "tiny"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world_size")));
  EXPECT_THAT(registry.Register("", InstanceRole::kContext, 1, "127.0.0.1:5", "tiny"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A configured instance's world size is the config's: both values named.
  EXPECT_THAT(registry.Register("ctx0", InstanceRole::kContext, 4, "127.0.0.1:5", "tiny"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the config says role context world_size 2, the instance says "
                                 "role context world_size 4")));
  // An instance the config does not name may join.
  LOCKSTEP_EXPECT_OK(registry.Register("extra", InstanceRole::kContext, 4, "127.0.0.1:6", "tiny"));
}

// What a leader reports of its ranks (ReportKvEvents) must fit the instance: the config's
// world size until it registers, then the registered one (the same for a configured one).
TEST_F(InstanceRegistryTest, ReportedRanksAreCheckedAgainstTheInstance) {
  InstanceRegistry registry(Options(), {Configured("ctx0", InstanceRole::kContext)}, clock_);
  LOCKSTEP_EXPECT_OK(registry.CheckRanks("ctx0", 2, {0, 1}));
  LOCKSTEP_EXPECT_OK(registry.CheckRanks("ctx0", 0, {1}));  // world size not stated
  EXPECT_THAT(registry.CheckRanks("ctx0", 2, {0, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instance ctx0 is configured with world_size 2, the report "
                                 "names rank 2")));
  EXPECT_THAT(registry.CheckRanks("ctx0", 2, {-1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names rank -1")));
  EXPECT_THAT(registry.CheckRanks("ctx0", 3, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instance ctx0 is configured with world_size 2, the report "
                                 "says world_size 3")));
  EXPECT_THAT(registry.CheckRanks("extra", 4, {0}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("'extra' is neither configured nor registered")));
  LOCKSTEP_ASSERT_OK(registry.Register("extra", InstanceRole::kContext, 4, "127.0.0.1:6", "tiny"));
  LOCKSTEP_EXPECT_OK(registry.CheckRanks("extra", 4, {3}));
  EXPECT_THAT(registry.CheckRanks("extra", 4, {4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instance extra is registered with world_size 4, the report "
                                 "names rank 4")));
}

TEST_F(InstanceRegistryTest, MissedHeartbeatsStopRoutingUntilRegisteredAgain) {
  InstanceRegistry registry(Options(), {}, clock_);
  LOCKSTEP_ASSERT_OK(registry.Register("agg0", InstanceRole::kAggregated, 1, "h:1", "tiny"));
  EXPECT_FALSE(registry.Heartbeat("unknown", {}));
  clock_.Advance(absl::Milliseconds(1500));
  EXPECT_TRUE(registry.Heartbeat("agg0", {.active_requests = 3, .free_blocks = 7}));
  EXPECT_EQ(StateOf(registry, "agg0").load.free_blocks, 7);
  clock_.Advance(absl::Milliseconds(1999));
  EXPECT_TRUE(registry.ExpireHeartbeats().empty());
  clock_.Advance(absl::Milliseconds(2));
  EXPECT_THAT(registry.ExpireHeartbeats(), ElementsAre("agg0"));
  EXPECT_TRUE(registry.ExpireHeartbeats().empty());  // reported once
  const InstanceState state = StateOf(registry, "agg0");
  EXPECT_EQ(state.health, InstanceHealth::kUnhealthy);
  EXPECT_THAT(state.reason, HasSubstr("no heartbeat for 2001 ms"));
  EXPECT_FALSE(registry.HasHealthy(InstanceRole::kAggregated));
  // A late heartbeat does not bring it back, and neither does a good poll.
  EXPECT_FALSE(registry.Heartbeat("agg0", {}));
  registry.ReportPollOk(TargetOf(registry, "agg0"), false);
  EXPECT_FALSE(registry.IsHealthy("agg0"));
  LOCKSTEP_ASSERT_OK(registry.Register("agg0", InstanceRole::kAggregated, 1, "h:2", "tiny"));
  EXPECT_TRUE(registry.IsHealthy("agg0"));
  EXPECT_TRUE(registry.Heartbeat("agg0", {}));
}

TEST_F(InstanceRegistryTest, FailedPollsMakeAnInstanceUnhealthyAndAGoodPollRestoresIt) {
  InstanceRegistry registry(Options(), {}, clock_);
  LOCKSTEP_ASSERT_OK(registry.Register("agg0", InstanceRole::kAggregated, 1, "h:1", "tiny"));
  const InstanceTarget target = TargetOf(registry, "agg0");
  EXPECT_FALSE(registry.ReportPollFailed(target, "refused", false));
  EXPECT_TRUE(registry.IsHealthy("agg0"));  // one failure is tolerated
  EXPECT_TRUE(registry.ReportPollFailed(target, "refused", false));
  EXPECT_FALSE(registry.IsHealthy("agg0"));
  EXPECT_EQ(StateOf(registry, "agg0").reason, "refused");
  EXPECT_FALSE(registry.ReportPollFailed(target, "refused", false));  // already out
  registry.ReportPollOk(target, false);
  EXPECT_TRUE(registry.IsHealthy("agg0"));
  // No progress counts at once.
  EXPECT_TRUE(registry.ReportPollFailed(target, "stuck", /*immediate=*/true));
  EXPECT_FALSE(registry.IsHealthy("agg0"));
}

TEST_F(InstanceRegistryTest, UnhealthySinceIsWhenItStoppedServing) {
  InstanceRegistry registry(Options(), {}, clock_);
  LOCKSTEP_ASSERT_OK(registry.Register("agg0", InstanceRole::kAggregated, 1, "h:1", "tiny"));
  const InstanceTarget target = TargetOf(registry, "agg0");
  EXPECT_EQ(StateOf(registry, "agg0").unhealthy_since, absl::InfinitePast());
  clock_.Advance(absl::Seconds(1));
  registry.ReportPollFailed(target, "refused", false);
  EXPECT_EQ(StateOf(registry, "agg0").unhealthy_since, absl::InfinitePast());  // tolerated
  clock_.Advance(absl::Seconds(1));
  const absl::Time second_failure = clock_.Now();
  registry.ReportPollFailed(target, "refused", false);
  clock_.Advance(absl::Seconds(5));
  registry.ReportPollFailed(target, "stuck", /*immediate=*/true);  // still out: time kept
  EXPECT_EQ(StateOf(registry, "agg0").unhealthy_since, second_failure);
  registry.ReportPollOk(target, false);
  EXPECT_EQ(StateOf(registry, "agg0").unhealthy_since, absl::InfinitePast());

  // Missed heartbeats: since the check that noticed; cleared by a new registration.
  clock_.Advance(absl::Seconds(3));
  const absl::Time expired = clock_.Now();
  EXPECT_THAT(registry.ExpireHeartbeats(), ElementsAre("agg0"));
  clock_.Advance(absl::Seconds(1));
  registry.ExpireHeartbeats();
  EXPECT_EQ(StateOf(registry, "agg0").unhealthy_since, expired);
  LOCKSTEP_ASSERT_OK(registry.Register("agg0", InstanceRole::kAggregated, 1, "h:2", "tiny"));
  EXPECT_EQ(StateOf(registry, "agg0").unhealthy_since, absl::InfinitePast());
}

TEST_F(InstanceRegistryTest, ReportsForAnOlderEpochAreIgnored) {
  InstanceRegistry registry(Options(), {}, clock_);
  LOCKSTEP_ASSERT_OK(registry.Register("agg0", InstanceRole::kAggregated, 1, "h:1", "tiny"));
  const InstanceTarget old_target = TargetOf(registry, "agg0");
  LOCKSTEP_ASSERT_OK(registry.Register("agg0", InstanceRole::kAggregated, 1, "h:2", "tiny"));
  EXPECT_FALSE(registry.ReportPollFailed(old_target, "x", true));
  EXPECT_TRUE(registry.IsHealthy("agg0"));
  v1::StatsResponse stats;
  stats.set_steps(5);
  registry.ReportStats(old_target, stats);
  EXPECT_FALSE(StateOf(registry, "agg0").has_stats);
  registry.ReportStats(TargetOf(registry, "agg0"), stats);
  EXPECT_EQ(StateOf(registry, "agg0").stats.steps(), 5);
}

TEST_F(InstanceRegistryTest, StaticAddressIsHealthyAfterAGoodPoll) {
  InstanceRegistry registry(Options(),
                            {Configured("agg0", InstanceRole::kAggregated, "127.0.0.1:9")}, clock_);
  EXPECT_FALSE(registry.IsHealthy("agg0"));
  ASSERT_EQ(registry.PollTargets().size(), 1u);
  registry.ReportPollOk(registry.PollTargets()[0], /*draining=*/false);
  EXPECT_TRUE(registry.IsHealthy("agg0"));
  // Static instances do not heartbeat: they never expire.
  clock_.Advance(absl::Minutes(1));
  EXPECT_TRUE(registry.ExpireHeartbeats().empty());
}

TEST_F(InstanceRegistryTest, DrainingTakesNoNewRequests) {
  InstanceRegistry registry(Options(), {}, clock_);
  LOCKSTEP_ASSERT_OK(registry.Register("agg0", InstanceRole::kAggregated, 1, "h:1", "tiny"));
  registry.ReportPollOk(TargetOf(registry, "agg0"), /*draining=*/true);
  EXPECT_EQ(StateOf(registry, "agg0").health, InstanceHealth::kDraining);
  EXPECT_TRUE(registry.IsServing("agg0"));
  EXPECT_FALSE(registry.Acquire(InstanceRole::kAggregated).ok());
}

TEST_F(InstanceRegistryTest, PoliciesPickAmongHealthyInstancesOfTheRole) {
  InstanceRegistry rr(Options(), {}, clock_);
  for (const char* name : {"a", "b"}) {
    LOCKSTEP_ASSERT_OK(rr.Register(name, InstanceRole::kAggregated, 1, "h:1", "tiny"));
  }
  LOCKSTEP_ASSERT_OK(rr.Register("ctx", InstanceRole::kContext, 1, "h:1", "tiny"));
  std::vector<std::string> picks;
  for (int i = 0; i < 4; ++i) picks.push_back(rr.Acquire(InstanceRole::kAggregated)->name);
  EXPECT_THAT(picks, ElementsAre("a", "b", "a", "b"));
  EXPECT_EQ(rr.Acquire(InstanceRole::kContext)->name, "ctx");

  InstanceRegistry ll(Options(config::RoutingPolicy::kLeastLoad), {}, clock_);
  for (const char* name : {"a", "b"}) {
    LOCKSTEP_ASSERT_OK(ll.Register(name, InstanceRole::kAggregated, 1, "h:1", "tiny"));
  }
  // Holding requests on "a" sends the next ones to "b" until loads even out.
  ASSERT_EQ(ll.Acquire(InstanceRole::kAggregated)->name, "a");
  EXPECT_EQ(ll.Acquire(InstanceRole::kAggregated)->name, "b");
  EXPECT_EQ(StateOf(ll, "a").in_flight, 1);
  EXPECT_EQ(StateOf(ll, "b").in_flight, 1);
  ll.Release("b");
  EXPECT_EQ(ll.Acquire(InstanceRole::kAggregated)->name, "b");
  ll.Release("a");
  EXPECT_EQ(ll.Acquire(InstanceRole::kAggregated)->name, "a");
  ll.Release("a");
  EXPECT_EQ(ll.Acquire(InstanceRole::kAggregated)->name, "a");
}

// KV events that put the first `blocks` blocks of `prompt` on `instance`'s `rank`.
void Holds(KvRouting& kv, const std::string& instance, int32_t rank, uint64_t seq,
           const std::vector<int32_t>& prompt, size_t blocks) {
  v1::ReportKvEventsRequest r;
  r.set_instance(instance);
  r.set_incarnation(1);
  r.set_hash_salt(9);
  r.set_tokens_per_block(4);
  v1::KvEventBatch* b = r.add_batches();
  b->set_rank(rank);
  b->set_seq(seq);
  const std::vector<uint64_t> chain = kv::PrefixHashChain(9, 4, prompt);
  for (size_t i = 0; i < blocks; ++i) b->add_committed(chain[i]);
  ASSERT_TRUE(kv.Apply(r).ok());
}

TEST_F(InstanceRegistryTest, KvAwareGoesWhereThePrefixIsAndHintsItsRank) {
  KvRouting kv({});
  InstanceRegistry::Options options = Options(config::RoutingPolicy::kKvAware);
  options.kv = &kv;
  InstanceRegistry registry(options, {}, clock_);
  for (const char* name : {"a", "b"}) {
    LOCKSTEP_ASSERT_OK(
        registry.Register(name, InstanceRole::kAggregated, 2, "127.0.0.1:5", "tiny"));
  }
  std::vector<int32_t> prompt(33);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i * 7);
  Holds(kv, "b", 1, 1, prompt, 6);
  Holds(kv, "b", 0, 1, prompt, 2);
  Holds(kv, "a", 0, 1, prompt, 1);
  for (int i = 0; i < 3; ++i) {  // b keeps winning though it gets busier
    absl::StatusOr<InstanceTarget> t = registry.Acquire(InstanceRole::kAggregated, {}, prompt);
    ASSERT_THAT(t, IsOk());
    EXPECT_EQ(t->name, "b");
    EXPECT_EQ(t->reason, RoutingReason::kPrefix);
    EXPECT_EQ(t->rank_hint, 1);
    EXPECT_EQ(t->cached_by_rank, (std::vector<int64_t>{8, 24}));
  }
  // Without a prompt (a generation leg): by load, no hint. a has nothing in flight.
  absl::StatusOr<InstanceTarget> t = registry.Acquire(InstanceRole::kAggregated);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->name, "a");
  EXPECT_EQ(t->reason, RoutingReason::kLoad);
  EXPECT_EQ(t->rank_hint, -1);
  // b registers again (it may have restarted): its prefixes are forgotten.
  LOCKSTEP_ASSERT_OK(registry.Register("b", InstanceRole::kAggregated, 2, "127.0.0.1:6", "tiny"));
  t = registry.Acquire(InstanceRole::kAggregated, {}, prompt);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->name, "a");
  EXPECT_EQ(t->rank_hint, 0);
  // a stops answering its heartbeats: gone from the index as well.
  clock_.Advance(absl::Seconds(3));
  registry.ExpireHeartbeats();
  EXPECT_EQ(kv.Stats().keys, 0);
}

TEST_F(InstanceRegistryTest, OtherPoliciesIgnoreThePrefixButReportIt) {
  KvRouting kv({});
  InstanceRegistry::Options options = Options(config::RoutingPolicy::kLeastLoad);
  options.kv = &kv;
  InstanceRegistry registry(options, {}, clock_);
  for (const char* name : {"a", "b"}) {
    LOCKSTEP_ASSERT_OK(
        registry.Register(name, InstanceRole::kAggregated, 2, "127.0.0.1:5", "tiny"));
  }
  std::vector<int32_t> prompt(17, 3);
  Holds(kv, "b", 1, 1, prompt, 4);
  std::vector<std::string> names;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<InstanceTarget> t = registry.Acquire(InstanceRole::kAggregated, {}, prompt);
    ASSERT_THAT(t, IsOk());
    EXPECT_EQ(t->reason, RoutingReason::kLoad);
    EXPECT_EQ(t->rank_hint, -1);
    if (t->name == "b") EXPECT_EQ(t->cached_by_rank, (std::vector<int64_t>{0, 16}));
    names.push_back(t->name);
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("a", "b"));  // by load
}

// router.max_queued_requests: a full instance is skipped (whatever the policy picks),
// and with every healthy one full the request is refused, not queued; a place freed by
// Release is taken again. An unhealthy instance does not count as full.
TEST_F(InstanceRegistryTest, InstancesAtTheQueueLimitAreNotPickedAndAllFullIsExhausted) {
  for (const config::RoutingPolicy policy :
       {config::RoutingPolicy::kRoundRobin, config::RoutingPolicy::kLeastLoad}) {
    SCOPED_TRACE(config::RoutingPolicyName(policy));
    InstanceRegistry::Options options = Options(policy);
    options.max_queued_requests = 2;
    InstanceRegistry registry(options, {}, clock_);
    for (const char* name : {"a", "b"}) {
      LOCKSTEP_ASSERT_OK(registry.Register(name, InstanceRole::kAggregated, 1, "h:1", "tiny"));
    }
    LOCKSTEP_ASSERT_OK(registry.Register("ctx", InstanceRole::kContext, 1, "h:1", "tiny"));
    for (int i = 0; i < 4; ++i) LOCKSTEP_ASSERT_OK(registry.Acquire(InstanceRole::kAggregated).status());
    EXPECT_EQ(StateOf(registry, "a").in_flight, 2);
    EXPECT_EQ(StateOf(registry, "b").in_flight, 2);
    EXPECT_FALSE(registry.HasRoom(InstanceRole::kAggregated));
    EXPECT_TRUE(registry.HasHealthy(InstanceRole::kAggregated));
    for (int i = 0; i < 10; ++i) {
      EXPECT_THAT(registry.Acquire(InstanceRole::kAggregated),
                  StatusIs(absl::StatusCode::kResourceExhausted,
                           HasSubstr("every healthy aggregated instance has 2 requests")));
    }
    EXPECT_EQ(StateOf(registry, "a").in_flight, 2);  // refusals count nothing
    EXPECT_EQ(StateOf(registry, "b").in_flight, 2);
    EXPECT_TRUE(registry.HasRoom(InstanceRole::kContext));  // per role
    registry.Release("b");
    EXPECT_TRUE(registry.HasRoom(InstanceRole::kAggregated));
    EXPECT_FALSE(registry.HasRoom(InstanceRole::kAggregated, {"b"}));
    absl::StatusOr<InstanceTarget> again = registry.Acquire(InstanceRole::kAggregated);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(again->name, "b");  // the only one with room, whatever the policy's turn
    // With "a" unhealthy, "b" full is all there is.
    registry.ReportPollFailed(TargetOf(registry, "a"), "down", /*immediate=*/true);
    EXPECT_THAT(registry.Acquire(InstanceRole::kAggregated),
                StatusIs(absl::StatusCode::kResourceExhausted));
    registry.ReportPollFailed(TargetOf(registry, "b"), "down", /*immediate=*/true);
    EXPECT_THAT(registry.Acquire(InstanceRole::kAggregated),
                StatusIs(absl::StatusCode::kUnavailable));
  }
}

}  // namespace
}  // namespace lockstep::router
