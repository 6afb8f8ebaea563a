#include "runtime/router/core/health_monitor.h"

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/router/core/flow_tracker.h"
#include "runtime/router/core/instance_progress.h"
#include "runtime/router/core/instance_registry.h"
#include "runtime/router/core/worker_stubs.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;

// A leader whose Health never answers within the monitor's deadline: it waits until
// the test ends (bounded), as a worker too busy to answer does.
class SilentWorker final : public v1::WorkerService::Service {
 public:
  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*,
                      v1::HealthResponse* response) override {
    release_.WaitForNotificationWithTimeout(absl::Seconds(30));
    response->set_state(v1::HealthResponse::STATE_SERVING);
    return grpc::Status::OK;
  }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }

 private:
  absl::Notification release_;
};

class HealthMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&worker_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
    registry_ = std::make_unique<InstanceRegistry>(
        InstanceRegistry::Options{.model = "tiny", .heartbeat_timeout = absl::Hours(1)},
        std::vector<config::InstanceConfig>{}, clock_);
    ASSERT_TRUE(
        registry_->Register("agg0", InstanceRole::kAggregated, 1, address_, "tiny").ok());
    ASSERT_TRUE(registry_->IsHealthy("agg0"));
  }
  void TearDown() override {
    worker_.Release();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  // A deadline far below the silent worker's wait: every poll fails, at once.
  static constexpr absl::Duration kRpcTimeout = absl::Milliseconds(50);

  SilentWorker worker_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  FakeClock clock_;
  std::unique_ptr<InstanceRegistry> registry_;
  WorkerStubs stubs_;
  FlowTracker flows_;
  InstanceProgress progress_;
};

// Under thousands of streams a worker may answer its poll late; while its streams keep
// delivering, that is not a death (it used to fail the instance and end every stream).
TEST_F(HealthMonitorTest, AMissedPollWhileStreamsProgressIsNotCounted) {
  HealthMonitor monitor(*registry_, stubs_, flows_, kRpcTimeout, &progress_);
  InstanceProgress::Counter responses = progress_.For("agg0");
  monitor.CheckOnce();  // the first poll has nothing to compare with: counted (1 of 2)
  EXPECT_TRUE(registry_->IsHealthy("agg0"));
  for (int round = 0; round < 4; ++round) {
    responses->fetch_add(3);  // the streams delivered between two polls
    monitor.CheckOnce();
    EXPECT_TRUE(registry_->IsHealthy("agg0")) << "round " << round;
  }
  // Silent and no longer streaming: the next missed poll is the second counted one.
  monitor.CheckOnce();
  EXPECT_FALSE(registry_->IsHealthy("agg0"));
}

// Without progress counts (or with streams that stopped), missed polls fail the
// instance as before.
TEST_F(HealthMonitorTest, MissedPollsWithoutProgressFailTheInstance) {
  HealthMonitor monitor(*registry_, stubs_, flows_, kRpcTimeout);
  monitor.CheckOnce();
  EXPECT_TRUE(registry_->IsHealthy("agg0"));
  monitor.CheckOnce();
  EXPECT_FALSE(registry_->IsHealthy("agg0"));
}

}  // namespace
}  // namespace lockstep::router
