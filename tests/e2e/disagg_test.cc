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

#include "absl/strings/str_cat.h"
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
        if (!problem.empty()) {
          absl::MutexLock lock(&mu);
          failures.push_back(absl::StrCat("request ", i, ": ", problem));
        }
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
  EXPECT_TRUE((*d)->Reap().empty()) << "a process died";
}

}  // namespace
}  // namespace lockstep::e2e
