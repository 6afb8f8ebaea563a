#include "runtime/worker/instance_bootstrap.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/comm/rendezvous_service.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;

// Bootstraps `n` ranks as threads against `address`; returns each rank's result.
std::vector<absl::StatusOr<InstanceGroups>> BootstrapAll(const std::string& address, int n) {
  std::vector<absl::StatusOr<InstanceGroups>> out;
  for (int r = 0; r < n; ++r) out.emplace_back(absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      BootstrapOptions o;
      o.rendezvous_address = address;
      o.instance = "gen0";
      o.rank = r;
      o.world_size = n;
      o.timeout = absl::Seconds(20);
      out[r] = BootstrapInstance(o);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(InstanceBootstrapTest, RanksAgreeOnAnEpochAndBuildTwoWorkingGroups) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  std::vector<absl::StatusOr<InstanceGroups>> groups = BootstrapAll((*server)->address(), 3);
  for (int r = 0; r < 3; ++r) ASSERT_THAT(groups[r], IsOk()) << "rank " << r;
  for (int r = 1; r < 3; ++r) EXPECT_EQ(groups[r]->epoch, groups[0]->epoch);
  // Both groups really connect the ranks: an all-reduce on each, from every thread.
  std::vector<std::thread> threads;
  std::vector<int64_t> sums(3, 0);
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      int64_t v[1] = {r + 1};
      ASSERT_THAT(groups[r]->executor->AllReduce(absl::MakeSpan(v), comm::ReduceOp::kSum,
                                                 {absl::Seconds(10), "test"}),
                  IsOk());
      int64_t w[1] = {10 * (r + 1)};
      ASSERT_THAT(groups[r]->engine->AllReduce(absl::MakeSpan(w), comm::ReduceOp::kSum,
                                               {absl::Seconds(10), "test"}),
                  IsOk());
      sums[r] = v[0] + w[0];
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(sums, (std::vector<int64_t>{66, 66, 66}));
}

TEST(InstanceBootstrapTest, ARelaunchedInstanceIgnoresTheStaleEpoch) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  // A previous incarnation left its epoch, joins and acknowledgements behind.
  std::string old_epoch;
  {
    std::vector<absl::StatusOr<InstanceGroups>> first = BootstrapAll((*server)->address(), 2);
    ASSERT_THAT(first[0], IsOk());
    old_epoch = first[0]->epoch;
  }
  std::vector<absl::StatusOr<InstanceGroups>> second = BootstrapAll((*server)->address(), 2);
  ASSERT_THAT(second[0], IsOk());
  ASSERT_THAT(second[1], IsOk());
  EXPECT_NE(second[0]->epoch, old_epoch);
  EXPECT_EQ(second[1]->epoch, second[0]->epoch);
}

TEST(InstanceBootstrapTest, AMissingRankIsADeadlineNotAHang) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  BootstrapOptions o;
  o.rendezvous_address = (*server)->address();
  o.instance = "ctx0";
  o.rank = 0;
  o.world_size = 2;  // rank 1 never comes
  o.timeout = absl::Milliseconds(500);
  absl::StatusOr<InstanceGroups> groups = BootstrapInstance(o);
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kDeadlineExceeded) << groups.status();
  EXPECT_NE(groups.status().message().find("ctx0"), absl::string_view::npos);
}

}  // namespace
}  // namespace lockstep::worker
