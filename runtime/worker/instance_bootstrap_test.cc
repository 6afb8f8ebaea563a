#include "runtime/worker/instance_bootstrap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/comm/rendezvous_service.h"
#include "runtime/comm/shm_segment.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

// Bootstraps `n` ranks as threads against `address`; `adjust` may change each rank's
// options. Returns each rank's result.
std::vector<absl::StatusOr<InstanceGroups>> BootstrapAll(
    const std::string& address, int n,
    const std::function<void(BootstrapOptions&)>& adjust = [](BootstrapOptions&) {}) {
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
      adjust(o);
      out[r] = BootstrapInstance(o);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// Sums rank+1 over both groups of every rank (one thread per rank); each rank's sum.
std::vector<int64_t> SumOverBothGroups(std::vector<absl::StatusOr<InstanceGroups>>& groups) {
  std::vector<std::thread> threads;
  std::vector<int64_t> sums(groups.size(), 0);
  for (size_t r = 0; r < groups.size(); ++r) {
    threads.emplace_back([&, r] {
      int64_t v[1] = {static_cast<int64_t>(r) + 1};
      EXPECT_THAT(groups[r]->executor->AllReduce(absl::MakeSpan(v), comm::ReduceOp::kSum,
                                                 {absl::Seconds(10), "test"}),
                  IsOk());
      int64_t w[1] = {10 * (static_cast<int64_t>(r) + 1)};
      EXPECT_THAT(groups[r]->engine->AllReduce(absl::MakeSpan(w), comm::ReduceOp::kSum,
                                               {absl::Seconds(10), "test"}),
                  IsOk());
      sums[r] = v[0] + w[0];
    });
  }
  for (std::thread& t : threads) t.join();
  return sums;
}

TEST(InstanceBootstrapTest, RanksAgreeOnAnEpochAndBuildTwoWorkingGroups) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  std::vector<absl::StatusOr<InstanceGroups>> groups = BootstrapAll((*server)->address(), 3);
  for (int r = 0; r < 3; ++r) ASSERT_THAT(groups[r], IsOk()) << "rank " << r;
  for (int r = 1; r < 3; ++r) EXPECT_EQ(groups[r]->epoch, groups[0]->epoch);
  // The default keeps gloo for both groups.
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(groups[r]->executor_transport, "gloo");
    EXPECT_EQ(groups[r]->engine_transport, "gloo");
  }
  // Both groups really connect the ranks: an all-reduce on each, from every thread.
  EXPECT_EQ(SumOverBothGroups(groups), (std::vector<int64_t>{66, 66, 66}));
}

TEST(InstanceBootstrapTest, AutoPicksSharedMemoryWhenEveryRankIsOnThisHost) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  std::vector<absl::StatusOr<InstanceGroups>> groups =
      BootstrapAll((*server)->address(), 3, [](BootstrapOptions& o) {
        o.vote_transport = config::CommTransport::kAuto;
        o.engine_transport = config::CommTransport::kShm;
      });
  for (int r = 0; r < 3; ++r) {
    ASSERT_THAT(groups[r], IsOk()) << "rank " << r;
    EXPECT_EQ(groups[r]->executor_transport, "shm");
    EXPECT_EQ(groups[r]->engine_transport, "shm");
  }
  EXPECT_EQ(SumOverBothGroups(groups), (std::vector<int64_t>{66, 66, 66}));
}

TEST(InstanceBootstrapTest, AutoFallsBackToGlooWhenARankIsOnAnotherHost) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  std::vector<absl::StatusOr<InstanceGroups>> groups =
      BootstrapAll((*server)->address(), 2, [](BootstrapOptions& o) {
        o.vote_transport = config::CommTransport::kAuto;
        o.engine_transport = config::CommTransport::kAuto;
        o.host_id = o.rank == 1 ? "other-boot/other-host/shm-dev:1:1" : "boot/host/shm-dev:1:1";
      });
  for (int r = 0; r < 2; ++r) {
    ASSERT_THAT(groups[r], IsOk()) << "rank " << r;
    EXPECT_EQ(groups[r]->executor_transport, "gloo");
    EXPECT_EQ(groups[r]->engine_transport, "gloo");
  }
  EXPECT_EQ(SumOverBothGroups(groups), (std::vector<int64_t>{33, 33}));
}

// With engine_transport nccl the CUDA engine makes its own group under the epoch: the
// bootstrap leaves the engine group to it; the vote never goes over NCCL.
TEST(InstanceBootstrapTest, NcclLeavesTheEngineGroupToTheDeviceEngine) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  std::vector<absl::StatusOr<InstanceGroups>> groups =
      BootstrapAll((*server)->address(), 2, [](BootstrapOptions& o) {
        o.engine_transport = config::CommTransport::kNccl;
      });
  for (int r = 0; r < 2; ++r) {
    ASSERT_THAT(groups[r], IsOk()) << "rank " << r;
    EXPECT_EQ(groups[r]->engine_transport, "nccl");
    EXPECT_EQ(groups[r]->engine, nullptr);
    ASSERT_NE(groups[r]->executor, nullptr);
    EXPECT_EQ(groups[r]->epoch, groups[0]->epoch);
  }
  std::vector<absl::StatusOr<InstanceGroups>> vote =
      BootstrapAll((*server)->address(), 1, [](BootstrapOptions& o) {
        o.instance = "nccl-vote";
        o.vote_transport = config::CommTransport::kNccl;
      });
  EXPECT_THAT(vote[0].status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("comm.vote_transport")));
}

TEST(InstanceBootstrapTest, ExplicitSharedMemoryAcrossHostsFailsOnEveryRank) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  std::vector<absl::StatusOr<InstanceGroups>> groups =
      BootstrapAll((*server)->address(), 2, [](BootstrapOptions& o) {
        o.vote_transport = config::CommTransport::kShm;
        o.host_id = o.rank == 1 ? "b/h2/shm-dev:1:1" : "b/h1/shm-dev:1:1";
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(
        groups[r].status(),
        StatusIs(absl::StatusCode::kFailedPrecondition,
                 HasSubstr("comm.vote_transport is shm, but the ranks are not on one "
                           "host: rank 0 is on b/h1/shm-dev:1:1, rank 1 on b/h2/shm-dev:1:1")));
  }
}

TEST(InstanceBootstrapTest, ANewEpochRemovesTheSegmentsACrashedBootstrapLeft) {
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> server =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(server, IsOk());
  std::string old_epoch;
  {
    std::vector<absl::StatusOr<InstanceGroups>> first = BootstrapAll((*server)->address(), 2);
    ASSERT_THAT(first[0], IsOk());
    old_epoch = first[0]->epoch;
  }
  // That launch's leader "crashed" after creating its segments, before its peers
  // attached (a clean bootstrap unlinks them as soon as every rank has attached).
  std::vector<std::string> stale;
  for (const char* group : {"exec", "engine"}) {
    stale.push_back(comm::ShmSegmentName("gen0", old_epoch, group));
    const int fd =
        shm_open(absl::StrCat("/", stale.back()).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << stale.back();
    close(fd);
  }
  std::vector<absl::StatusOr<InstanceGroups>> second =
      BootstrapAll((*server)->address(), 2, [](BootstrapOptions& o) {
        o.vote_transport = config::CommTransport::kShm;
        o.engine_transport = config::CommTransport::kShm;
      });
  ASSERT_THAT(second[0], IsOk());
  ASSERT_THAT(second[1], IsOk());
  EXPECT_NE(second[0]->epoch, old_epoch);
  for (const std::string& name : stale) {
    struct stat st;
    EXPECT_NE(stat(absl::StrCat("/dev/shm/", name).c_str(), &st), 0) << name << " is still there";
  }
  EXPECT_EQ(SumOverBothGroups(second), (std::vector<int64_t>{33, 33}));
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
