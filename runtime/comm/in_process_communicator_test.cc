// InProcessCommunicator's own behaviour (the solo communicator, MarkDead). The shared
// contract and the conformance suite run in communicator_contract_test.
#include "runtime/comm/in_process_communicator.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/testing/conformance.h"

namespace lockstep::comm {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::HasSubstr;

CallOptions Tag(absl::string_view tag, absl::Duration timeout = absl::Seconds(10)) {
  CallOptions options;
  options.tag = tag;
  options.timeout = timeout;
  return options;
}

TEST(InProcessCommunicatorTest, SoloCommunicatorIsALocalCopy) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  EXPECT_EQ(solo->rank(), 0);
  EXPECT_EQ(solo->world_size(), 1);
  EXPECT_THAT(testing::RunConformance(*solo, seed, /*rounds=*/2), IsOk());
  std::vector<int64_t> data = {3, -4};
  EXPECT_THAT(solo->AllReduce(absl::MakeSpan(data), ReduceOp::kSum, Tag("vote")), IsOk());
  EXPECT_THAT(data, ::testing::ElementsAre(3, -4));
}

TEST(InProcessCommunicatorTest, MarkDeadWakesBlockedPeers) {
  auto group = MakeInProcessGroup(3);
  std::vector<absl::Status> results(2);
  std::vector<std::thread> peers;
  for (int r = 0; r < 2; ++r) {
    peers.emplace_back([&, r] { results[r] = group[r]->Barrier(Tag("step", absl::Seconds(30))); });
  }
  static_cast<InProcessCommunicator*>(group[2].get())->MarkDead();
  for (std::thread& t : peers) t.join();
  for (const absl::Status& s : results) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("marked dead")));
  }
  EXPECT_THAT(group[2]->Barrier(Tag("step")), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace lockstep::comm
