// End to end, disaggregated serving with the KV moved over UCX (transfer.transport: ucx,
// docs/transfer-ucx.md) on the UCX transports UCX_TLS names (the BUILD file runs it with
// shm and with tcp): a context DEP2 and a generation DEP4 instance as real processes.
// The same requests then go through the same deployment over the TCP data plane
// (transport: tcp). Every greedy output over UCX equals the TCP data plane's and
// aggregated serving's of the same prompt and seed; every pull went over UCX (no rank
// fell back); afterwards every pool is at rest.
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/reference.h"

namespace lockstep::e2e {
namespace {

constexpr int kRequests = 24;
constexpr int kClients = 6;
constexpr uint64_t kSeed = 42;

struct Served {
  std::vector<std::vector<int32_t>> tokens;  // by request
  std::vector<std::string> failures;
};

// Serves `requests` through a fresh disaggregated deployment with `transport`, checks
// that its pools come to rest and that every transfer was received, and returns the
// outputs. `check_logs` runs on the deployment before it stops.
Served ServeDisagg(const std::string& model, const std::string& run_dir,
                   const std::string& transport, const std::vector<ReferenceRequest>& requests,
                   const std::function<void(const launcher::LocalDeployment&)>& check_logs) {
  Served served;
  served.tokens.resize(requests.size());
  DisaggOptions options;
  options.transfer_transport = transport;
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d = launcher::LocalDeployment::Start(
      DisaggYaml(model, options), run_dir, LockstepBinary(), absl::Seconds(180));
  if (!d.ok()) {
    served.failures.push_back(absl::StrCat(transport, ": start: ", d.status().ToString()));
    return served;
  }
  absl::Mutex mu;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = t; i < requests.size(); i += kClients) {
        const ReferenceRequest& r = requests[i];
        const launcher::GrpcResult got =
            (*d)->Generate(r.prompt, r.sampling.max_tokens, r.sampling.seed, absl::Seconds(120));
        absl::MutexLock lock(&mu);
        if (got.error_code != 0) {
          served.failures.push_back(absl::StrCat(transport, ": request ", i, ": error ",
                                                 got.error_code, ": ", got.error_message));
        }
        served.tokens[i] = got.tokens;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  std::string ctx, gen;
  if (!(*d)->WaitFor(
          [&] {
            ctx = CheckAtRest(**d, "ctx0");
            gen = CheckAtRest(**d, "gen0");
            return ctx.empty() && gen.empty();
          },
          absl::Seconds(20))) {
    served.failures.push_back(absl::StrCat(transport, ": not at rest: ", ctx, gen));
  }
  const absl::StatusOr<v1::StatsResponse> stats = InstanceStats(**d, "gen0");
  if (!stats.ok()) {
    served.failures.push_back(absl::StrCat(transport, ": stats: ", stats.status().ToString()));
  } else if (stats->transfers_received() != kRequests || stats->transfer_failures() != 0) {
    served.failures.push_back(absl::StrCat(transport, ": ", stats->transfers_received(),
                                           " transfers received, ", stats->transfer_failures(),
                                           " failed (want ", kRequests, " and 0)"));
  }
  check_logs(**d);
  if (!served.failures.empty()) served.failures.push_back(LogTails(**d));
  return served;
}

TEST(DisaggUcxTest, CtxDep2GenDep4OverUcxEqualsTcpDataPlaneAndAggregated) {
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  std::mt19937_64 rng(kSeed);
  std::vector<ReferenceRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    ReferenceRequest r;
    const int len = 8 + static_cast<int>(rng() % 120);
    for (int c = 0; c < len; ++c) r.prompt.push_back(static_cast<int32_t>(32 + rng() % 95));
    r.sampling.max_tokens = 2 + static_cast<int>(rng() % 16);
    r.sampling.seed = rng();
    r.sampling.ignore_eos = true;
    requests.push_back(std::move(r));
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> expected =
      ReferenceGenerate(model, "", 0, requests);
  ASSERT_TRUE(expected.ok()) << expected.status();

  const Served ucx =
      ServeDisagg(model, tmp + "/run_ucx", "ucx", requests, [](const launcher::LocalDeployment& d) {
        // Every rank served and pulled over UCX: each turned it on, none fell back.
        for (const launcher::ProcessSpec& p : d.plan().workers) {
          const std::string log = d.LogOf(p.name);
          EXPECT_TRUE(absl::StrContains(log, "UCX data plane on")) << p.name;
          EXPECT_FALSE(absl::StrContains(log, "fall back from UCX")) << p.name << "\n" << log;
        }
      });
  for (const std::string& f : ucx.failures) ADD_FAILURE() << f;
  const Served tcp =
      ServeDisagg(model, tmp + "/run_tcp", "tcp", requests, [](const launcher::LocalDeployment& d) {
        for (const launcher::ProcessSpec& p : d.plan().workers) {
          EXPECT_TRUE(absl::StrContains(d.LogOf(p.name), "UCX data plane off")) << p.name;
        }
      });
  for (const std::string& f : tcp.failures) ADD_FAILURE() << f;
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_FALSE(ucx.tokens[i].empty()) << "request " << i << " (seed " << kSeed << ")";
    EXPECT_EQ(ucx.tokens[i], tcp.tokens[i]) << "request " << i << " (seed " << kSeed << ")";
    EXPECT_EQ(ucx.tokens[i], (*expected)[i]) << "request " << i << " (seed " << kSeed << ")";
  }
}

}  // namespace
}  // namespace lockstep::e2e
