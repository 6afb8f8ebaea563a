// End to end, disaggregated serving in the shape of the motivating deployment
// (docs/design.md §1): a context instance DEP2 and a generation instance DEP4 with
// max_batch_size 2 per rank, speculative decoding K = 3 with an unpaired draft pool,
// the tiny-moe target and draft, as real processes. About 200 requests complete with 0
// errors, every greedy output equals aggregated serving of the same prompt and seed,
// and afterwards every pool of both instances is at rest and the per-step audit found
// nothing.
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/reference.h"

namespace lockstep::e2e {
namespace {

TEST(DisaggTest, CtxDep2GenDep4MatchesAggregatedServing) {
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  std::mt19937_64 rng(8);
  std::vector<ReferenceRequest> requests;
  for (int i = 0; i < 200; ++i) {
    ReferenceRequest r;
    const int len = 8 + static_cast<int>(rng() % 88);
    for (int c = 0; c < len; ++c) r.prompt.push_back(static_cast<int32_t>(32 + rng() % 95));
    r.sampling.max_tokens = 2 + static_cast<int>(rng() % 30);
    r.sampling.seed = rng();
    r.sampling.ignore_eos = true;
    requests.push_back(std::move(r));
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> expected =
      ReferenceGenerate(model, "", 0, requests);
  ASSERT_TRUE(expected.ok()) << expected.status();

  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d =
      launcher::LocalDeployment::Start(DisaggYaml(model, /*fault_timeouts=*/false, kE2eComm),
                                       tmp + "/run", LockstepBinary(), absl::Seconds(180));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(CheckTransport(**d, kE2eComm), "");
  absl::Mutex mu;
  std::vector<std::string> failures;
  int64_t request_proposed = 0, request_accepted = 0;  // summed over the requests
  std::vector<std::thread> clients;
  for (int t = 0; t < 16; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = t; i < requests.size(); i += 16) {
        const ReferenceRequest& r = requests[i];
        const launcher::GrpcResult got =
            (*d)->Generate(r.prompt, r.sampling.max_tokens, r.sampling.seed, absl::Seconds(120));
        std::string problem;
        if (got.error_code != 0) {
          problem = absl::StrCat("error ", got.error_code, ": ", got.error_message);
        } else if (got.tokens != (*expected)[i]) {
          size_t k = 0;
          while (k < got.tokens.size() && k < (*expected)[i].size() &&
                 got.tokens[k] == (*expected)[i][k]) {
            ++k;
          }
          problem = absl::StrCat("tokens differ at ", k, " of ", (*expected)[i].size(), " (prompt ",
                                 r.prompt.size(), ", max ", r.sampling.max_tokens, ")");
        }
        if (problem.empty() && got.drafts_accepted > got.drafts_proposed) {
          problem = absl::StrCat("accepted ", got.drafts_accepted, " of ", got.drafts_proposed,
                                 " drafts");
        }
        absl::MutexLock lock(&mu);
        request_proposed += got.drafts_proposed;
        request_accepted += got.drafts_accepted;
        if (!problem.empty()) failures.push_back(absl::StrCat("request ", i, ": ", problem));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;

  // Every pool back at rest on both instances, audit clean on every rank. Claims end
  // when the generation side's pull completes, so allow the last ones a moment.
  std::string ctx, gen;
  EXPECT_TRUE((*d)->WaitFor(
      [&] {
        ctx = CheckAtRest(**d, "ctx0");
        gen = CheckAtRest(**d, "gen0");
        return ctx.empty() && gen.empty();
      },
      absl::Seconds(20)))
      << ctx << gen;
  const absl::StatusOr<v1::StatsResponse> gen_stats = InstanceStats(**d, "gen0");
  ASSERT_TRUE(gen_stats.ok());
  EXPECT_EQ(gen_stats->transfers_received(), 200);
  EXPECT_EQ(gen_stats->transfer_failures(), 0);
  EXPECT_GT(gen_stats->draft_tokens_accepted(), 0);

  // Speculation metrics: the generation instance's drafts are the draft model's, every
  // step ran with K <= 3 and proposed at most K, and the router's per-request drafts
  // add up to the instance's (the context leg verifies none).
  ASSERT_EQ(gen_stats->drafts_by_method_size(), 1);
  const v1::DraftTokens& drafts = gen_stats->drafts_by_method(0);
  EXPECT_EQ(drafts.method(), "draft_model");
  EXPECT_EQ(drafts.proposed(), gen_stats->draft_tokens_proposed());
  EXPECT_EQ(drafts.accepted(), gen_stats->draft_tokens_accepted());
  EXPECT_LE(drafts.accepted(), drafts.proposed());
  EXPECT_LE(gen_stats->draft_k_steps_size(), 4);
  int64_t k_steps = 0, most_drafts = 0;
  for (int k = 0; k < gen_stats->draft_k_steps_size(); ++k) {
    k_steps += gen_stats->draft_k_steps(k);
    most_drafts += k * gen_stats->draft_k_steps(k);
  }
  EXPECT_GT(k_steps, 0);
  EXPECT_LE(drafts.proposed(), most_drafts);
  // The value of the one sample line starting with `series` ("name{labels}"); -1 if none.
  auto sample = [](const std::string& metrics, const std::string& series) {
    for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
      double value = 0;
      if (absl::ConsumePrefix(&line, series + " ") && absl::SimpleAtod(line, &value)) {
        return value;
      }
    }
    return -1.0;
  };
  std::string metrics;
  EXPECT_TRUE((*d)->WaitFor(
      [&] {
        metrics = (*d)->Get("/metrics").second;
        return sample(metrics, "lockstep_router_draft_tokens_proposed_total{method=\"draft_model\"}") ==
               static_cast<double>(drafts.proposed());
      },
      absl::Seconds(10)))
      << metrics;
  EXPECT_EQ(sample(metrics, "lockstep_router_draft_tokens_accepted_total{method=\"draft_model\"}"),
            static_cast<double>(drafts.accepted()));
  const double sampled_requests = sample(
      metrics, "lockstep_router_request_draft_acceptance_count{method=\"draft_model\"}");
  EXPECT_GT(sampled_requests, 0);
  EXPECT_LE(sampled_requests, 200);
  // What the clients were told, request by request, adds up to the same.
  EXPECT_EQ(request_proposed, drafts.proposed());
  EXPECT_EQ(request_accepted, drafts.accepted());
  EXPECT_TRUE((*d)->Reap().empty()) << "a process died";
}

}  // namespace
}  // namespace lockstep::e2e
