// NcclCommunicator's own behaviour over fake primitives: the fault table of a device
// collective library (a primitive that never completes, an asynchronous error), and
// that sizes always agree before a primitive runs. The shared contract and the
// conformance suite run in communicator_contract_test.
#include "runtime/comm/nccl_communicator.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/testing/fake_primitives.h"

namespace lockstep::comm {
namespace {

using ::lockstep::comm::testing::FakePrimitives;
using ::lockstep::comm::testing::MakeFakePrimitivesGroup;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

CallOptions Tag(absl::string_view tag, absl::Duration timeout = absl::Seconds(10)) {
  CallOptions options;
  options.tag = tag;
  options.timeout = timeout;
  return options;
}

// The communicators of one fake group, with a view of each rank's primitives.
struct FakeGroup {
  explicit FakeGroup(int world) {
    for (auto& p : MakeFakePrimitivesGroup(world, "gen0/exec")) {
      primitives.push_back(p.get());
      comms.push_back(std::make_unique<NcclCommunicator>(std::move(p)));
    }
  }
  // Runs fn(rank) on one thread per rank.
  template <typename Fn>
  std::vector<absl::Status> Run(Fn fn) {
    std::vector<absl::Status> results(comms.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < comms.size(); ++r) {
      threads.emplace_back([&, r] { results[r] = fn(*comms[r]); });
    }
    for (std::thread& t : threads) t.join();
    return results;
  }

  std::vector<FakePrimitives*> primitives;
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
};

absl::Status Vote(Communicator& comm, int64_t value = 1,
                  absl::Duration timeout = absl::Seconds(10)) {
  int64_t v[4] = {value, 0, 0, 0};
  return comm.AllReduce(absl::MakeSpan(v), ReduceOp::kMax, Tag("vote", timeout));
}

TEST(NcclCommunicatorTest, TheVoteIsOneHeaderRoundReducedInRankOrder) {
  FakeGroup group(4);
  for (const absl::Status& s : group.Run([](Communicator& comm) -> absl::Status {
         std::vector<int64_t> v = {comm.rank(), -comm.rank(), int64_t{1} << 62, 7};
         RETURN_IF_ERROR(comm.AllReduce(absl::MakeSpan(v), ReduceOp::kSum, Tag("vote")));
         // 4 * 2^62 wraps around to 0, as on every transport.
         if (v != std::vector<int64_t>{6, -6, 0, 28}) return absl::InternalError("wrong sum");
         return absl::OkStatus();
       })) {
    EXPECT_THAT(s, IsOk());
  }
  for (FakePrimitives* p : group.primitives) EXPECT_EQ(p->operations(), 1);
}

TEST(NcclCommunicatorTest, LargeFixedOpsAgreeOnSizesThenMovePayloads) {
  FakeGroup group(4);
  for (const absl::Status& s : group.Run([](Communicator& comm) -> absl::Status {
         std::vector<int64_t> v(100, comm.rank() + 1);
         RETURN_IF_ERROR(comm.AllReduce(absl::MakeSpan(v), ReduceOp::kMin, Tag("big")));
         if (v[99] != 1) return absl::InternalError("wrong min");
         std::vector<int64_t> in(40, comm.rank());
         std::vector<int64_t> out(160);
         RETURN_IF_ERROR(comm.AllGather(in, absl::MakeSpan(out), Tag("load")));
         if (out[41] != 1 || out[159] != 3) return absl::InternalError("wrong gather");
         std::vector<int64_t> send(80);
         for (int i = 0; i < 80; ++i) send[i] = comm.rank() * 100 + i / 20;  // block = peer
         std::vector<int64_t> recv(80);
         RETURN_IF_ERROR(comm.AllToAll(send, absl::MakeSpan(recv), Tag("a2a")));
         for (int s = 0; s < 4; ++s) {
           if (recv[s * 20] != s * 100 + comm.rank()) return absl::InternalError("wrong a2a");
         }
         return absl::OkStatus();
       })) {
    EXPECT_THAT(s, IsOk());
  }
  // Each call: the header round, then one payload primitive.
  for (FakePrimitives* p : group.primitives) EXPECT_EQ(p->operations(), 6);
}

TEST(NcclCommunicatorTest, NeverCompletingPrimitiveIsDeadlineExceededAndAbortsOnce) {
  FakeGroup group(2);
  group.primitives[1]->HangAt(0);
  std::vector<absl::Status> results =
      group.Run([](Communicator& comm) { return Vote(comm, 1, absl::Milliseconds(200)); });
  EXPECT_THAT(results[0], IsOk());  // Rank 1's part was enqueued; only its wait hangs.
  EXPECT_THAT(results[1], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                   HasSubstr("AllReduce('vote') on rank 1 of nccl group "
                                             "'gen0/exec'")));
  EXPECT_EQ(group.primitives[1]->aborts(), 1);
  // Broken: no further primitive, no second abort.
  EXPECT_THAT(Vote(*group.comms[1]), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(group.primitives[1]->aborts(), 1);
  EXPECT_EQ(group.primitives[1]->operations(), 1);
  // The aborted rank is gone for its peer: Unavailable, not a wait to the deadline.
  EXPECT_THAT(Vote(*group.comms[0], 1, absl::Seconds(30)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 1")));
  EXPECT_EQ(group.primitives[0]->aborts(), 1);
}

TEST(NcclCommunicatorTest, AsyncErrorIsUnavailable) {
  FakeGroup group(2);
  group.primitives[0]->FailAt(1, absl::UnavailableError("ncclRemoteError: peer went away"));
  std::vector<absl::Status> results = group.Run([](Communicator& comm) -> absl::Status {
    RETURN_IF_ERROR(Vote(comm));
    std::string data(1000, 'x');  // Beyond the header: a header round, then a broadcast.
    return comm.Broadcast(&data, 0, Tag("intake", absl::Milliseconds(500)));
  });
  EXPECT_THAT(results[0],
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("Broadcast('intake') on rank 0 of nccl group 'gen0/exec': "
                                 "ncclRemoteError: peer went away")));
  EXPECT_EQ(group.primitives[0]->aborts(), 1);
  EXPECT_THAT(results[1], Not(IsOk()));
}

TEST(NcclCommunicatorTest, DifferentSizesAreADesyncBeforeAnyPayloadMoves) {
  FakeGroup group(2);
  std::vector<absl::Status> results = group.Run([](Communicator& comm) {
    std::vector<int64_t> v(comm.rank() == 0 ? 100 : 99, 1);
    return comm.AllReduce(absl::MakeSpan(v), ReduceOp::kSum, Tag("big"));
  });
  for (const absl::Status& s : results) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                            "collective desync: rank 0 called AllReduce('big') with 100 "
                            "elements (sum), rank 1 called AllReduce('big') with 99 elements "
                            "(sum)"));
  }
  for (FakePrimitives* p : group.primitives) {
    EXPECT_EQ(p->operations(), 1);  // The header only: no mismatched payload primitive.
    EXPECT_EQ(p->aborts(), 0);      // Nothing in flight to abandon.
  }
}

TEST(NcclCommunicatorTest, BrokenGroupIsFailedPreconditionWithoutTouchingThePrimitives) {
  FakeGroup group(2);
  group.primitives[0]->FailAt(0, absl::UnavailableError("ncclSystemError"));
  group.Run([](Communicator& comm) { return Vote(comm, 1, absl::Milliseconds(200)); });
  const int64_t before = group.primitives[0]->operations();
  std::vector<float> recv(2);
  EXPECT_THAT(
      group.comms[0]->AllToAllV(std::vector<float>{1, 2}, std::vector<int64_t>{1, 1},
                                absl::MakeSpan(recv), std::vector<int64_t>{1, 1}, Tag("moe.l0")),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("ncclSystemError")));
  EXPECT_EQ(group.primitives[0]->operations(), before);
  EXPECT_EQ(group.primitives[0]->aborts(), 1);
}

TEST(NcclCommunicatorTest, ByteOpsBeyondTheHeaderUseExactPeerSizes) {
  FakeGroup group(3);
  for (const absl::Status& s : group.Run([](Communicator& comm) -> absl::Status {
         const std::string mine(300 * (comm.rank() + 1), static_cast<char>('a' + comm.rank()));
         ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGatherBytes(mine, Tag("ag")));
         if (all[2] != std::string(900, 'c')) return absl::InternalError("wrong allgather");
         ASSIGN_OR_RETURN(std::vector<std::string> got, comm.Gather(mine, 1, Tag("g")));
         if (comm.rank() == 1 && got[0] != std::string(300, 'a')) {
           return absl::InternalError("wrong gather");
         }
         std::vector<std::string> send(3);
         for (int r = 0; r < 3; ++r) send[r] = std::string(r * 10 + comm.rank(), 'x');
         ASSIGN_OR_RETURN(std::vector<std::string> recv, comm.AllToAllBytes(send, Tag("b")));
         for (int s = 0; s < 3; ++s) {
           if (recv[s].size() != static_cast<size_t>(comm.rank() * 10 + s)) {
             return absl::InternalError("wrong all-to-all bytes");
           }
         }
         return absl::OkStatus();
       })) {
    EXPECT_THAT(s, IsOk());
  }
}

}  // namespace
}  // namespace lockstep::comm
