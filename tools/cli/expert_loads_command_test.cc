// `lockstep expert-loads` against a leader's Stats: the dump it writes is the window's
// text form and eplb::ParseLoads (the offline planner's reader) gets the routed counts
// back; a leader without a window, and one that does not answer, exit 1.
#include "tools/cli/expert_loads_command.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/eplb/placement.h"
#include "runtime/worker/expert_load_stats.h"

namespace lockstep::cli {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::ElementsAre;

// A leader whose Stats carries `stats` as is.
class StatsOnly final : public v1::WorkerService::Service {
 public:
  explicit StatsOnly(v1::StatsResponse stats) : stats_(std::move(stats)) {}
  grpc::Status Stats(grpc::ServerContext*, const v1::StatsRequest*,
                     v1::StatsResponse* response) override {
    *response = stats_;
    return grpc::Status::OK;
  }

 private:
  const v1::StatsResponse stats_;
};

struct Leader {
  explicit Leader(v1::StatsResponse stats) : service(std::move(stats)) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    address = "127.0.0.1:" + std::to_string(port);
  }
  ~Leader() { server->Shutdown(); }
  StatsOnly service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

engine::ExpertLoadSnapshot Window() {
  engine::ExpertLoadSnapshot s;
  s.windows = 4;
  s.forwards = 16;
  s.num_layers = 2;
  s.num_experts = 4;
  s.num_ranks = 2;
  s.routed = {0, 0, 0, 0, 40, 8, 8, 8};
  s.computed = {0, 0, 48, 16};
  return s;
}

TEST(ExpertLoadsCommandTest, WritesTheWindowThePlannerReads) {
  v1::StatsResponse stats;
  stats.set_instance("dep2");
  worker::SetExpertLoadStats(Window(), &stats);
  Leader leader(stats);
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/loads.txt";
  ASSERT_EQ(RunExpertLoadsCommand({leader.address, "--out", path}), 0);
  const auto text = engine::ReadFileToString(path);
  ASSERT_THAT(text.status(), IsOk());
  EXPECT_EQ(*text, Window().Format());
  const auto loads = eplb::ParseLoads(*text);
  ASSERT_THAT(loads.status(), IsOk());
  ASSERT_EQ(loads->size(), 2u);
  EXPECT_THAT((*loads)[1], ElementsAre(40, 8, 8, 8));
}

TEST(ExpertLoadsCommandTest, NoWindowOrNoLeaderIsAnError) {
  v1::StatsResponse none;
  none.set_instance("dep2");
  Leader leader(none);
  EXPECT_EQ(RunExpertLoadsCommand({leader.address}), 1);
  const std::string gone = leader.address;
  leader.server->Shutdown();
  EXPECT_EQ(RunExpertLoadsCommand({gone, "--timeout-ms", "500"}), 1);
  EXPECT_EQ(RunExpertLoadsCommand({}), 2);
}

}  // namespace
}  // namespace lockstep::cli
