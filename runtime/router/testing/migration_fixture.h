// The fixture of the router's migration tests (router_migration_test.cc,
// router_migration_faults_test.cc): a router over real HTTP and gRPC with a fake
// worker per instance, client streams on threads of their own, and the migration
// counters. TearDown shuts the router down first (ending every stream still running),
// then joins the stream threads.
//
// Thread safety: the test thread only.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TESTING_MIGRATION_FIXTURE_H_
#define LOCKSTEP_RUNTIME_ROUTER_TESTING_MIGRATION_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "runtime/config/deployment_config.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router::testing {

// A /v1/completions body for model "tiny".
std::string CompletionBody(const std::string& prompt, int max_tokens, bool stream);
// The byte tokenizer's ids of `text`.
std::vector<int32_t> Ids(const std::string& text);

class MigrationFixture : public ::testing::Test {
 protected:
  struct Setup {
    int migration_limit = 2;
    int64_t max_queued_requests = 0;  // router.max_queued_requests
    int64_t request_timeout_s = 20;
    int64_t heartbeat_timeout_ms = 1000;
    // The router runs on fake_clock_ (heartbeats expire by it: set a long timeout), not
    // on the system clock.
    bool fake_clock = false;
  };

  // A router with `instances` and a registered, heartbeating fake worker for each.
  void Start(const std::vector<std::pair<std::string, config::InstanceRole>>& instances,
             const Setup& setup);
  void Start(const std::vector<std::pair<std::string, config::InstanceRole>>& instances) {
    Start(instances, Setup());
  }
  void TearDown() override;

  FakeWorker& Worker(const std::string& name);
  // Of `names`, the worker that has received a request (waits for one, bounded).
  FakeWorker* Busy(const std::vector<std::string>& names);
  // Of the two workers `a` and `b`, the one that is not `one`.
  FakeWorker& Other(const FakeWorker* one, const std::string& a, const std::string& b);

  // With aggregated instances agg0 and agg1 started, streams `body` with both set to
  // stall after 3 tokens and waits until the one serving it has stalled; the other is
  // then set to stream freely. Returns {serving, other}; serving is null (a test
  // failure is recorded) when no instance received the request or stalled in time.
  std::pair<FakeWorker*, FakeWorker*> StallOneOfTwo(const std::string& body);

  // Streams `body` (POST /v1/completions) on a thread of its own; returns its index.
  int StartStream(const std::string& body);
  // Waits for stream `i` to end.
  HttpResult& StreamResult(int i = 0);

  // lockstep_router_migrations_total, every reason.
  double Migrations();

  // Declared before router_, so that it outlives the router's threads.
  FakeClock fake_clock_{absl::Now()};
  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<HttpClient> http_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;

 private:
  struct Stream {
    std::thread thread;
    HttpResult result;
  };
  std::vector<std::unique_ptr<Stream>> streams_;
};

}  // namespace lockstep::router::testing

#endif  // LOCKSTEP_RUNTIME_ROUTER_TESTING_MIGRATION_FIXTURE_H_
