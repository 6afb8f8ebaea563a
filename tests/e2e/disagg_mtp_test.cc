// End to end, the DeepSeek-V3 family disaggregated, with and without MTP speculative
// decoding (make-model's tiny-dsv3-mtp: the tiny DeepSeek-V3-family target with one
// multi-token-prediction layer), as real processes on loopback:
//   - MTP: a context instance DEP2 (it runs the MTP layer on the prompt; the layer's KV
//     in its paired draft pool travels with the target's, the first drafts with the
//     handle), a generation instance DEP4 with K = 3 (max_batch_size 2 per rank, so
//     ranks pad) and a second generation instance DEP2 with K = 1 (a different K than
//     the context's). Every greedy output equals aggregated serving without speculation
//     (one in-process rank): disaggregated = aggregated and spec = no-spec at once.
//     Both generation instances served requests, the generation instances report
//     acceptance by draft position on the router's /metrics, every pool is at rest and
//     the per-step audit found nothing.
//   - Without speculation: the same context DEP2 + generation DEP4 deployment without a
//     draft pool anywhere; every greedy output equals aggregated serving.
//   - Mixed: a context instance DEP2 with MTP behind a generation instance DEP2 without
//     speculation (no draft pool: it pulls the target KV alone and ignores the first
//     drafts) and one DEP2 with K = 2; every greedy output equals aggregated serving and
//     both generation instances served requests.
//   - The reverse, a generation instance with MTP behind a context instance without a
//     draft pool, is refused at start naming both instances (docs/design.md §6).
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/reference.h"

namespace lockstep::e2e {
namespace {

constexpr int kRequests = 64;
constexpr int kClients = 8;

// One instance of the deployment; K > 0: MTP with K drafts over a paired draft pool.
std::string Instance(const std::string& name, const std::string& role, int world_size,
                     int max_batch_size, int max_num_tokens, int k) {
  const std::string pool = k > 0 ? "paired" : "none";
  std::string out = absl::StrCat("  - name: ", name, "\n    role: ", role,
                                 "\n    world_size: ", world_size, "\n    engine: cpu\n",
                                 "    executor: {max_batch_size: ", max_batch_size,
                                 ", max_num_tokens: ", max_num_tokens,
                                 ", max_num_active_requests: ", 2 * max_batch_size,
                                 ", chunk_size: 64, draft_pool: ", pool,
                                 ", audit_every_step: true}\n",
                                 "    kv: {tokens_per_block: 16, num_blocks: 256",
                                 k > 0 ? ", draft_num_blocks: 256" : "", "}\n");
  if (k > 0) absl::StrAppend(&out, "    speculative: {method: mtp, k: ", k, "}\n");
  absl::StrAppend(&out, CommSettings(kE2eComm));
  return out;
}

// Context DEP2 with `ctx_k`, then each generation instance (name, world size, K).
std::string Yaml(const std::string& model_dir, int ctx_k,
                 const std::vector<std::tuple<std::string, int, int>>& generation) {
  std::string out = absl::StrCat(R"(model:
  name: tiny-dsv3-mtp
  path: )",
                                 model_dir, R"(
router:
  policy: round_robin
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 2000
  health_check_interval_ms: 200
instances:
)",
                                 Instance("ctx0", "context", 2, 8, 512, ctx_k));
  for (const auto& [name, world_size, k] : generation) {
    absl::StrAppend(&out, Instance(name, "generation", world_size, 2, 64, k));
  }
  return out;
}

class DisaggMtpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string tmp = TestTmpDir();
    model_ = new std::string(tmp + "/models/tiny-dsv3-mtp");
    const std::string make =
        absl::StrCat(LockstepBinary(), " make-model --preset tiny-dsv3-mtp --out '", *model_,
                     "' > '", tmp, "/make_model.log' 2>&1");
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
    std::mt19937_64 rng(36);
    requests_ = new std::vector<ReferenceRequest>();
    for (int i = 0; i < kRequests; ++i) {
      ReferenceRequest r;
      const int len = 4 + static_cast<int>(rng() % 60);
      for (int c = 0; c < len; ++c) r.prompt.push_back(static_cast<int32_t>(32 + rng() % 95));
      r.sampling.max_tokens = 2 + static_cast<int>(rng() % 24);
      r.sampling.seed = rng();
      r.sampling.ignore_eos = true;
      requests_->push_back(std::move(r));
    }
    // Aggregated serving without speculation: one rank, the worker's executor and engine.
    absl::StatusOr<std::vector<std::vector<int32_t>>> expected =
        ReferenceGenerate(*model_, "", 0, *requests_);
    ASSERT_TRUE(expected.ok()) << expected.status();
    expected_ = new std::vector<std::vector<int32_t>>(std::move(*expected));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete requests_;
    delete expected_;
  }
  void SetUp() override { ASSERT_NE(expected_, nullptr) << "no reference outputs"; }

  // Sends every request (greedy) to `d` from kClients threads; returns what differs
  // from the reference, one line per request.
  static std::vector<std::string> Serve(launcher::LocalDeployment& d) {
    absl::Mutex mu;
    std::vector<std::string> failures;
    std::vector<std::thread> clients;
    for (int t = 0; t < kClients; ++t) {
      clients.emplace_back([&, t] {
        for (size_t i = t; i < requests_->size(); i += kClients) {
          const ReferenceRequest& r = (*requests_)[i];
          const launcher::GrpcResult got =
              d.Generate(r.prompt, r.sampling.max_tokens, r.sampling.seed, absl::Seconds(120));
          const std::vector<int32_t>& want = (*expected_)[i];
          std::string problem;
          if (got.error_code != 0) {
            problem = absl::StrCat("error ", got.error_code, ": ", got.error_message);
          } else if (got.tokens != want) {
            size_t k = 0;
            while (k < got.tokens.size() && k < want.size() && got.tokens[k] == want[k]) ++k;
            problem = absl::StrCat("tokens differ at ", k, " of ", want.size(), " (prompt ",
                                   r.prompt.size(), ")");
          }
          if (problem.empty()) continue;
          absl::MutexLock lock(&mu);
          failures.push_back(absl::StrCat("request ", i, ": ", problem));
        }
      });
    }
    for (std::thread& t : clients) t.join();
    return failures;
  }

  // Every pool of `instances` at rest and their audits clean (claims end when the
  // generation side's pull completes: the last ones get a moment).
  static void ExpectAtRest(launcher::LocalDeployment& d, const std::vector<std::string>& names) {
    std::string problems;
    EXPECT_TRUE(d.WaitFor(
        [&] {
          problems.clear();
          for (const std::string& name : names) problems += CheckAtRest(d, name);
          return problems.empty();
        },
        absl::Seconds(20)))
        << problems;
  }

  static std::string* model_;
  static std::vector<ReferenceRequest>* requests_;
  static std::vector<std::vector<int32_t>>* expected_;
};

std::string* DisaggMtpTest::model_ = nullptr;
std::vector<ReferenceRequest>* DisaggMtpTest::requests_ = nullptr;
std::vector<std::vector<int32_t>>* DisaggMtpTest::expected_ = nullptr;

// The value of the one sample line starting with `series` ("name{labels}"); -1 if none.
double Sample(const std::string& metrics, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    double value = 0;
    if (absl::ConsumePrefix(&line, series + " ") && absl::SimpleAtod(line, &value)) return value;
  }
  return -1.0;
}

TEST_F(DisaggMtpTest, CtxDep2GenDep4WithMtpEqualsAggregatedWithoutSpeculation) {
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d = launcher::LocalDeployment::Start(
      Yaml(*model_, 3, {{"gen0", 4, 3}, {"gen1", 2, 1}}), TestTmpDir() + "/run_mtp",
      LockstepBinary(), absl::Seconds(180));
  ASSERT_TRUE(d.ok()) << d.status();
  for (const std::string& f : Serve(**d)) ADD_FAILURE() << f;
  ExpectAtRest(**d, {"ctx0", "gen0", "gen1"});

  int64_t received = 0;
  for (const auto& [name, k] : {std::pair<std::string, int>{"gen0", 3}, {"gen1", 1}}) {
    SCOPED_TRACE(name);
    const absl::StatusOr<v1::StatsResponse> stats = InstanceStats(**d, name);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_GT(stats->transfers_received(), 0) << "round robin sends every instance requests";
    EXPECT_EQ(stats->transfer_failures(), 0);
    received += stats->transfers_received();
    ASSERT_EQ(stats->drafts_by_method_size(), 1);
    EXPECT_EQ(stats->drafts_by_method(0).method(), "mtp");
    EXPECT_GT(stats->draft_tokens_accepted(), 0);
    // Acceptance by position: up to the instance's K, and the sums are the totals.
    ASSERT_EQ(stats->draft_position_proposed_size(), k);
    ASSERT_EQ(stats->draft_position_accepted_size(), k);
    int64_t proposed = 0, accepted = 0;
    for (int j = 0; j < k; ++j) {
      proposed += stats->draft_position_proposed(j);
      accepted += stats->draft_position_accepted(j);
      EXPECT_LE(stats->draft_position_accepted(j), stats->draft_position_proposed(j));
    }
    EXPECT_EQ(proposed, stats->draft_tokens_proposed());
    EXPECT_EQ(accepted, stats->draft_tokens_accepted());
  }
  EXPECT_EQ(received, kRequests);
  // The router's /metrics shows them, as of its last poll of each instance.
  const absl::StatusOr<v1::StatsResponse> gen0 = InstanceStats(**d, "gen0");
  ASSERT_TRUE(gen0.ok());
  const std::string first = "lockstep_instance_draft_position_proposed_total{instance=\"gen0\","
                            "position=\"1\"}";
  std::string metrics;
  EXPECT_TRUE((*d)->WaitFor(
      [&] {
        metrics = (*d)->Get("/metrics").second;
        return Sample(metrics, first) == static_cast<double>(gen0->draft_position_proposed(0));
      },
      absl::Seconds(10)))
      << metrics;
  const double length =
      Sample(metrics, "lockstep_instance_draft_mean_accepted_length{instance=\"gen0\"}");
  EXPECT_GT(length, 1.0) << metrics;
  EXPECT_LE(length, 4.0) << metrics;
  EXPECT_GT(Sample(metrics, "lockstep_instance_draft_position_acceptance{instance=\"gen0\","
                            "position=\"3\"}"),
            0.0)
      << metrics;
  EXPECT_TRUE((*d)->Reap().empty()) << "a process died";
}

TEST_F(DisaggMtpTest, CtxDep2GenDep4WithoutSpeculationEqualsAggregated) {
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d =
      launcher::LocalDeployment::Start(Yaml(*model_, 0, {{"gen0", 4, 0}}),
                                       TestTmpDir() + "/run_plain", LockstepBinary(),
                                       absl::Seconds(180));
  ASSERT_TRUE(d.ok()) << d.status();
  for (const std::string& f : Serve(**d)) ADD_FAILURE() << f;
  ExpectAtRest(**d, {"ctx0", "gen0"});
  const absl::StatusOr<v1::StatsResponse> stats = InstanceStats(**d, "gen0");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->transfers_received(), kRequests);
  EXPECT_EQ(stats->draft_tokens_proposed(), 0);
  EXPECT_EQ(stats->draft_position_proposed_size(), 0);
  EXPECT_TRUE((*d)->Reap().empty()) << "a process died";
}

TEST_F(DisaggMtpTest, CtxDep2WithMtpServesAGenerationInstanceWithoutDraftPool) {
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d = launcher::LocalDeployment::Start(
      Yaml(*model_, 3, {{"gen0", 2, 0}, {"gen1", 2, 2}}), TestTmpDir() + "/run_mixed",
      LockstepBinary(), absl::Seconds(180));
  ASSERT_TRUE(d.ok()) << d.status();
  for (const std::string& f : Serve(**d)) ADD_FAILURE() << f;
  ExpectAtRest(**d, {"ctx0", "gen0", "gen1"});
  const absl::StatusOr<v1::StatsResponse> plain = InstanceStats(**d, "gen0");
  const absl::StatusOr<v1::StatsResponse> mtp = InstanceStats(**d, "gen1");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(mtp.ok()) << mtp.status();
  EXPECT_GT(plain->transfers_received(), 0) << "round robin sends every instance requests";
  EXPECT_GT(mtp->transfers_received(), 0);
  EXPECT_EQ(plain->transfers_received() + mtp->transfers_received(), kRequests);
  EXPECT_EQ(plain->transfer_failures() + mtp->transfer_failures(), 0);
  EXPECT_EQ(plain->draft_tokens_proposed(), 0);
  EXPECT_GT(mtp->draft_tokens_accepted(), 0);
  EXPECT_TRUE((*d)->Reap().empty()) << "a process died";
}

TEST_F(DisaggMtpTest, GenerationWithMtpBehindContextWithoutDraftPoolIsRefusedAtStart) {
  const absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d =
      launcher::LocalDeployment::Start(Yaml(*model_, 0, {{"gen0", 2, 2}}),
                                       TestTmpDir() + "/run_refused", LockstepBinary(),
                                       absl::Seconds(180));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(std::string(d.status().message()),
              ::testing::HasSubstr("generation instance 'gen0' drafts with mtp on the draft KV "
                                   "its context instance makes, but context instance 'ctx0' has "
                                   "no draft pool"));
}

}  // namespace
}  // namespace lockstep::e2e
