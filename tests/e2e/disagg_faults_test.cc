// Faults in disaggregated serving (context DEP2 + generation DEP4, K = 3, unpaired
// draft pool), each as real processes and real signals:
//   1. a client cancels while its request's KV is in transfer;
//   2. a context rank is stopped (SIGSTOP) past the transfer deadline, then resumed
//      (a pull that missed the deadline migrates: a fresh context leg on ctx0);
//   3. a generation rank is killed (SIGKILL) mid-run, then its instance is relaunched.
// Each ends with the affected requests cancelled or failed with a clear status, no
// client waiting forever, no block leaked on either instance, and the deployment
// serving again.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/router.grpc.pb.h"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"

namespace lockstep::e2e {
namespace {

std::vector<int32_t> Prompt(int i) {
  std::vector<int32_t> p;
  for (int c = 0; c < 24 + i % 40; ++c) p.push_back(33 + (i * 7 + c) % 90);
  return p;
}

void SignalInstance(const launcher::LocalDeployment& d, const std::string& instance, int ranks,
                    int signal) {
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = d.PidOf(absl::StrCat(instance, "/rank", r));
    if (pid > 0) kill(pid, signal);
  }
}

// Both instances at rest (no block used, nothing active, audit clean) within 20 s.
void ExpectAtRest(launcher::LocalDeployment& d) {
  std::string problems;
  EXPECT_TRUE(d.WaitFor(
      [&] {
        problems = CheckAtRest(d, "ctx0") + CheckAtRest(d, "gen0");
        return problems.empty();
      },
      absl::Seconds(20)))
      << problems;
}

// Many requests at once from client threads; returns each one's result.
std::vector<launcher::GrpcResult> RunConcurrently(const launcher::LocalDeployment& d, int n,
                                                  int max_tokens) {
  std::vector<launcher::GrpcResult> results(n);
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      results[i] = d.Generate(Prompt(i), max_tokens, static_cast<uint64_t>(i), absl::Seconds(60));
    });
  }
  for (std::thread& t : clients) t.join();
  return results;
}

class DisaggFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model = TestTmpDir() + "/models/tiny-moe";
    ASSERT_TRUE(EnsureTinyMoe(model).ok());
    absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d = launcher::LocalDeployment::Start(
        DisaggYaml(model, /*fault_timeouts=*/true), TestTmpDir() + "/run", LockstepBinary(),
        absl::Seconds(180));
    ASSERT_TRUE(d.ok()) << d.status();
    d_ = *std::move(d);
  }
  std::unique_ptr<launcher::LocalDeployment> d_;
};

TEST_F(DisaggFaultsTest, CancelMidTransferStopContextRankKillGenerationRank) {
  launcher::LocalDeployment& d = *d_;
  // Warm up: the deployment serves.
  ASSERT_EQ(d.Generate(Prompt(0), 8, 1).error_code, 0);

  {
    SCOPED_TRACE("1. a client cancels while its KV is in transfer");
    auto stub = v1::RouterService::NewStub(
        grpc::CreateChannel(d.grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::RouterGenerateRequest request;
    request.set_model("tiny-moe");
    for (int32_t t : Prompt(3)) request.mutable_tokens()->add_ids(t);
    request.mutable_sampling()->set_max_tokens(60);
    request.mutable_sampling()->set_ignore_eos(true);
    auto reader = stub->Generate(&context, request);
    v1::RouterGenerateResponse first;
    ASSERT_TRUE(reader->Read(&first));      // the context leg ended: its KV waits for a pull
    SignalInstance(d, "ctx0", 2, SIGSTOP);  // the pull cannot complete now
    context.TryCancel();
    v1::RouterGenerateResponse rest;
    while (reader->Read(&rest)) {
    }
    const grpc::Status status = reader->Finish();
    SignalInstance(d, "ctx0", 2, SIGCONT);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
    ExpectAtRest(d);
    EXPECT_EQ(d.Generate(Prompt(4), 8, 2).error_code, 0);
  }

  {
    SCOPED_TRACE("2. a context rank stopped past the transfer deadline, then resumed");
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
      // Once requests are flowing, freeze the context ranks; resume them once the
      // generation side has failed a transfer past its deadline (bounded).
      d.WaitFor([&] { return d.LoadOf("gen0") >= 2; }, absl::Seconds(30));
      auto failures = [&] {
        absl::StatusOr<v1::StatsResponse> s = InstanceStats(d, "gen0");
        return s.ok() ? s->transfer_failures() : int64_t{-1};
      };
      const int64_t before = failures();
      SignalInstance(d, "ctx0", 2, SIGSTOP);
      stopped = true;
      d.WaitFor([&] { return failures() > before; }, absl::Seconds(10));
      SignalInstance(d, "ctx0", 2, SIGCONT);
    });
    constexpr char kPullMigrations[] =
        "lockstep_router_migrations_total{reason=\"kv_pull_failed\"}";
    const double migrated_before = RouterMetric(d, kPullMigrations);
    const std::vector<launcher::GrpcResult> results = RunConcurrently(d, 24, 24);
    stopper.join();
    ASSERT_TRUE(stopped.load());
    int failed = 0;
    for (const launcher::GrpcResult& r : results) {
      if (r.error_code == 0) continue;
      ++failed;
      EXPECT_TRUE(absl::StrContains(r.error_message, "ctx0")) << r.error_message;
    }
    // A request whose pull missed the deadline migrates with a fresh context leg (on
    // ctx0 again, the only context instance): it completes once ctx0 resumes, or fails
    // naming ctx0.
    const double migrated = RouterMetric(d, kPullMigrations) - migrated_before;
    std::cerr << "context freeze: " << failed << " of 24 requests failed, " << migrated
              << " failed pulls migrated\n";
    EXPECT_GT(failed + migrated, 0) << "no request was caught by the stall";
    ExpectAtRest(d);
    // The freeze can outlast the heartbeat timeout: the router then holds ctx0 unhealthy
    // until its next heartbeat, and a request sent before that is refused (UNAVAILABLE,
    // seen once in a full run).
    ASSERT_TRUE(d.WaitHealthy(absl::Seconds(60)).ok());
    const launcher::GrpcResult after = d.Generate(Prompt(5), 8, 3);
    EXPECT_EQ(after.error_code, 0) << after.error_message;
  }

  {
    SCOPED_TRACE("3. a generation rank killed mid-run, its instance relaunched");
    std::atomic<bool> killed{false};
    std::thread killer([&] {
      d.WaitFor([&] { return d.LoadOf("gen0") >= 4; }, absl::Seconds(30));
      SignalInstance(d, "gen0", 4, 0);
      const pid_t pid = d.PidOf("gen0/rank2");
      if (pid > 0 && kill(pid, SIGKILL) == 0) killed = true;
    });
    const std::vector<launcher::GrpcResult> results = RunConcurrently(d, 16, 60);
    killer.join();
    ASSERT_TRUE(killed.load());
    int failed = 0;
    for (const launcher::GrpcResult& r : results) {
      failed += r.error_code != 0;
      // Ended by the router, not by the client's own deadline (RunConcurrently's 60 s).
      EXPECT_NE(r.error_code, grpc::StatusCode::DEADLINE_EXCEEDED) << r.error_message;
    }
    EXPECT_GT(failed, 0) << "requests in flight on the dead instance must fail";
    // The surviving generation ranks stop too (they cannot step without their peer);
    // the context instance releases the claims nobody will pull (failed pulls, leases).
    ASSERT_TRUE(d.WaitFor(
        [&] {
          d.Reap();
          for (int r = 0; r < 4; ++r) {
            if (d.PidOf(absl::StrCat("gen0/rank", r)) > 0) return false;
          }
          return true;
        },
        absl::Seconds(60)));
    std::string ctx_problems;
    EXPECT_TRUE(d.WaitFor(
        [&] {
          ctx_problems = CheckAtRest(d, "ctx0");
          return ctx_problems.empty();
        },
        absl::Seconds(20)))
        << ctx_problems;
    // The router has taken the dead instance out of rotation before it comes back.
    ASSERT_TRUE(d.WaitFor([&] { return d.InstanceState("gen0") != "healthy"; }, absl::Seconds(10)));
    ASSERT_TRUE(d.RestartInstance("gen0").ok());
    ASSERT_TRUE(d.WaitHealthy(absl::Seconds(60)).ok());
    const launcher::GrpcResult again = d.Generate(Prompt(6), 8, 4);
    EXPECT_EQ(again.error_code, 0) << again.error_message;
    ExpectAtRest(d);
  }
}

}  // namespace
}  // namespace lockstep::e2e
