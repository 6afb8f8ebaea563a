// End to end, kv_aware routing: the router and one aggregated DEP2 instance of the
// tiny-moe model (CPU engine) as real processes. Two conversations start at the same
// time, so their first turns land on different ranks (one request per rank at most);
// every follow-up turn, sent alone, must land on the rank holding its conversation's
// prefix — which, for the conversation on rank 1, only the router's rank hint makes
// happen (alone on an idle instance, rank assignment picks rank 0). The router checks
// the rank each response names against the hint it sent.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/router.grpc.pb.h"
#include "runtime/launcher/local_deployment.h"
#include "runtime/security/grpc_credentials.h"
#include "tests/e2e/e2e_util.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::e2e {
namespace {

constexpr int kTpb = 16;

std::string Yaml(const std::string& model_dir) {
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
router:
  policy: kv_aware
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 2000
  health_check_interval_ms: 200
  kv_event_interval_ms: 10
instances:
  - name: agg0
    role: aggregated
    world_size: 2
    engine: cpu
    executor: {max_batch_size: 4, max_num_tokens: 256, max_num_active_requests: 1,
               chunk_size: 64, audit_every_step: true}
    kv: {tokens_per_block: 16, num_blocks: 256, prefix_reuse: true}
)",
                      CommSettings(kE2eComm));
}

// The value of the sample `series` (name with its labels, as rendered) on /metrics;
// -1 when absent.
double Metric(const launcher::LocalDeployment& d, const std::string& series) {
  const auto [status, body] = d.Get("/metrics");
  if (status != 200) return -1;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double value = 0;
    return absl::SimpleAtod(line, &value) ? value : -1;
  }
  return -1;
}

// Requests the router has sent to `instance` and not seen end.
int64_t RouterInFlight(const launcher::LocalDeployment& d, const std::string& instance) {
  auto router = v1::RouterService::NewStub(security::CreateChannel(d.grpc_address()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ListInstancesResponse list;
  if (!router->ListInstances(&context, v1::ListInstancesRequest(), &list).ok()) return -1;
  for (const v1::InstanceInfo& info : list.instances()) {
    if (info.name() == instance) return info.router_in_flight();
  }
  return -1;
}

struct Conversation {
  std::vector<int32_t> context;  // every turn so far, prompts and replies
  int64_t reusable = 0;          // full blocks of the last prompt (cached before replying)
};

TEST(KvRoutingTest, FollowUpTurnsLandOnTheRankHoldingTheirPrefix) {
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  absl::StatusOr<tok::ByteTokenizer> tokenizer = tok::ByteTokenizer::LoadFromModelDir(model);
  ASSERT_TRUE(tokenizer.ok());
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
      launcher::LocalDeployment::Start(Yaml(model), tmp + "/run", LockstepBinary(),
                                       absl::Seconds(120));
  ASSERT_TRUE(started.ok()) << started.status();
  launcher::LocalDeployment& d = **started;

  // Two conversations with nothing in common (they differ from the first token on).
  std::vector<Conversation> conversations(2);
  const char* openings[2] = {
      "Alpha: you are a careful assistant who answers questions about rivers and lakes.",
      "Bravo: you are a terse assistant who answers questions about mountains and snow."};
  for (int c = 0; c < 2; ++c) conversations[c].context = tokenizer->Encode(openings[c]);

  // First turns at the same time: the second reaches the instance while the first still
  // decodes (96 tokens), and the cap of one request per rank sends it to the other rank.
  auto turn = [&](int c, int max_tokens) {
    Conversation& conv = conversations[c];
    conv.reusable = static_cast<int64_t>(conv.context.size() - 1) / kTpb * kTpb;
    const launcher::GrpcResult r =
        d.Generate(conv.context, max_tokens, /*seed=*/static_cast<uint64_t>(c));
    EXPECT_EQ(r.error_code, 0) << "conversation " << c << ": " << r.error_message;
    conv.context.insert(conv.context.end(), r.tokens.begin(), r.tokens.end());
  };
  std::thread first([&] { turn(0, 96); });
  ASSERT_TRUE(d.WaitFor([&] { return RouterInFlight(d, "agg0") >= 1; }, absl::Seconds(30)));
  turn(1, 96);
  first.join();
  // Both ranks' prefixes reach the router's index.
  ASSERT_TRUE(d.WaitFor(
      [&] {
        return Metric(d, R"(lockstep_router_kv_index_source_keys{instance="agg0",rank="0"})") > 0 &&
               Metric(d, R"(lockstep_router_kv_index_source_keys{instance="agg0",rank="1"})") > 0;
      },
      absl::Seconds(10)))
      << "the first turns did not land on both ranks\n"
      << LogTails(d);

  // Follow-ups, one at a time on an idle instance.
  int64_t follow_ups = 0;
  int64_t min_cached = 0;
  for (int t = 2; t <= 3; ++t) {
    for (int c = 0; c < 2; ++c) {
      const std::vector<int32_t> user =
          tokenizer->Encode(absl::StrCat(" User turn ", t, ": tell me more, please."));
      Conversation& conv = conversations[c];
      // What the router must see cached: the previous prompt's full blocks.
      min_cached += conv.reusable;
      conv.context.insert(conv.context.end(), user.begin(), user.end());
      turn(c, 16);
      ++follow_ups;
    }
  }
  EXPECT_EQ(Metric(d, R"(lockstep_router_rank_hints_total{outcome="honoured"})"), follow_ups)
      << LogTails(d);
  EXPECT_LT(Metric(d, R"(lockstep_router_rank_hints_total{outcome="overridden"})"), 1);
  EXPECT_GE(Metric(d, R"(lockstep_router_routing_decisions_total{reason="prefix"})"), follow_ups);
  EXPECT_GE(Metric(d, "lockstep_router_prefix_cached_tokens_total"), min_cached);
  std::string problems;
  EXPECT_TRUE(d.WaitFor(
      [&] {
        problems = CheckAtRest(d, "agg0");
        return problems.empty();
      },
      absl::Seconds(20)))
      << problems;
  EXPECT_TRUE(d.Reap().empty()) << "a process died";
}

}  // namespace
}  // namespace lockstep::e2e
