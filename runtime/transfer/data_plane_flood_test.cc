// KV transfers between GrpcTransceivers while the context rank's TCP data plane is
// flooded or full (tcp_data_server.h, receive_workers.h): 64+ idle connections and
// slow-drip ones (a byte at a time, never a whole frame), before and during the
// transfers, fail no transfer; a data plane that refuses a puller's fresh connection
// makes the pull go over gRPC. Real sockets on 127.0.0.1:0, one process.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/tcp_data_server.h"
#include "runtime/transfer/tcp_wire.h"
#include "runtime/transfer/testing/transfer_fixture.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using testing::AwaitEvents;
using testing::CompareMovedBlocks;
using ::testing::IsEmpty;
using testing::SmallDescriptor;
using testing::TestBlocks;
using testing::TestRank;
using testing::TransportTest;

constexpr absl::Duration kWait = absl::Seconds(60);
constexpr int32_t kNumBlocks = 256;

// Block ids handed out without reuse, in a seeded random order, per pool.
class BlockIds {
 public:
  explicit BlockIds(std::mt19937_64& rng) {
    for (std::vector<BlockId>* pool : {&target_, &draft_}) {
      for (int32_t b = 0; b < kNumBlocks; ++b) pool->push_back(BlockId(b));
      std::shuffle(pool->begin(), pool->end(), rng);
    }
  }

  // Request `id`'s blocks for `num_tokens` tokens, target and draft.
  TestBlocks Take(RequestId id, int64_t num_tokens, const KvDescriptor& d) {
    TestBlocks b;
    b.id = id;
    b.generation = 1000 + static_cast<uint64_t>(id.value());
    b.draft_generation = 2000 + static_cast<uint64_t>(id.value());
    b.num_tokens = num_tokens;
    Pop(target_, d.target->BlocksFor(num_tokens), b.blocks);
    Pop(draft_, d.draft->BlocksFor(num_tokens), b.draft_blocks);
    return b;
  }

 private:
  static void Pop(std::vector<BlockId>& from, int64_t count, std::vector<BlockId>& to) {
    for (int64_t i = 0; i < count && !from.empty(); ++i) {
      to.push_back(from.back());
      from.pop_back();
    }
  }

  std::vector<BlockId> target_;
  std::vector<BlockId> draft_;
};

class DataPlaneFloodTest : public TransportTest {
 protected:
  std::unique_ptr<TestRank> MakeRank(const std::string& name, const TcpDataServerOptions& plane,
                                     uint64_t fill_seed) {
    return Rank({.name = name,
                 .descriptor = d_,
                 .num_blocks = kNumBlocks,
                 .max_concurrent_receives = 4,
                 .data_plane = plane},
                fill_seed);
  }

  // A connection to `rank`'s data plane that the test holds.
  static TcpSocket Connect(TestRank& rank) {
    absl::StatusOr<TcpSocket> socket = ConnectTcp(rank->data_plane_address(), absl::Now() + kWait);
    EXPECT_THAT(socket.status(), IsOk());
    return socket.ok() ? *std::move(socket) : TcpSocket();
  }

  const KvDescriptor d_ = SmallDescriptor();
};

// Before the transfers, 72 idle and 8 slow-drip connections (more than the default 64
// in the handshake); during them, up to 64 more and a byte on each drip connection now
// and then. Every transfer succeeds, bit-exact, over the data plane or over gRPC; after
// the flood, with its idle connections still open, a new puller gets onto the data plane.
TEST_P(DataPlaneFloodTest, IdleAndSlowDripConnectionsFailNoTransfer) {
  SCOPED_TRACE(SeedTrace(seed_));
  auto ctx = MakeRank("ctx0 rank 0", {}, seed_ + 1);
  auto gen0 = MakeRank("gen0 rank 0", {}, 0);
  auto gen1 = MakeRank("gen1 rank 0", {}, 0);
  ASSERT_TRUE(ctx && gen0 && gen1);
  const TcpDataServer* plane = (*ctx)->data_plane();
  ASSERT_NE(plane, nullptr);

  std::vector<TcpSocket> idle;
  std::vector<TcpSocket> drip;
  for (int i = 0; i < 72; ++i) idle.push_back(Connect(*ctx));
  const char byte = static_cast<char>(kTcpWireMagic & 0xff);
  for (int i = 0; i < 8; ++i) {
    drip.push_back(Connect(*ctx));
    SendAll(drip.back(), &byte, 1, absl::Now() + kWait, nullptr).IgnoreError();
  }
  ASSERT_TRUE(
      plane->AwaitStats([](const TcpDataServer::Stats& s) { return s.accepted >= 80; }, kWait));

  absl::Notification done;
  std::thread flood([&] {
    std::vector<TcpSocket> more;
    for (int round = 0; round < 64 && !done.HasBeenNotified(); ++round) {
      absl::StatusOr<TcpSocket> socket =
          ConnectTcp((*ctx)->data_plane_address(), absl::Now() + kWait);
      if (socket.ok()) more.push_back(*std::move(socket));
      if (round < 14) {  // 15 bytes at most: never a whole 16-byte prefix
        for (const TcpSocket& s : drip) {
          SendAll(s, &byte, 1, absl::Now() + absl::Seconds(1), nullptr).IgnoreError();
        }
      }
      done.WaitForNotificationWithTimeout(absl::Milliseconds(5));  // pacing only
    }
  });

  BlockIds ctx_blocks(rng_);
  std::vector<BlockIds> gen_blocks = {BlockIds(rng_), BlockIds(rng_)};
  std::vector<TestRank*> gens = {gen0.get(), gen1.get()};
  constexpr int kPerRank = 12;
  std::vector<std::vector<TestBlocks>> sent(2);
  std::vector<std::vector<TestBlocks>> received(2);
  for (int g = 0; g < 2; ++g) {
    for (int i = 0; i < kPerRank; ++i) {
      const int n = g * kPerRank + i;
      const int64_t tokens = 9 + n % 13;
      sent[g].push_back(ctx_blocks.Take(RequestId(100 + n), tokens, d_));
      received[g].push_back(gen_blocks[g].Take(RequestId(500 + n), tokens, d_));
      ASSERT_THAT((*ctx)->StartSend(SendSpec{sent[g].back(), tokens, clock_.Now() + kWait}),
                  IsOk());
      ASSERT_THAT((*gens[g])->StartReceive(
                      Receive(received[g].back(), (*ctx)->address(), sent[g].back().id, kWait)),
                  IsOk());
    }
  }
  for (int g = 0; g < 2; ++g) {
    const std::vector<TransferEvent> events = AwaitEvents(*gens[g], kPerRank, kWait);
    EXPECT_EQ(events.size(), static_cast<size_t>(kPerRank));
    for (const TransferEvent& event : events) {
      EXPECT_THAT(event.status, IsOk()) << "gen" << g << " request " << event.id.value();
    }
    for (int i = 0; i < kPerRank; ++i) {
      EXPECT_THAT(CompareMovedBlocks(*ctx, sent[g][i], *gens[g], received[g][i], d_), IsEmpty());
    }
    EXPECT_EQ((*gens[g])->pulls_over_tcp() + (*gens[g])->pulls_over_grpc(), kPerRank);
  }
  done.Notify();
  flood.join();
  const std::vector<TransferEvent> sends = AwaitEvents(*ctx, 2 * kPerRank, kWait);
  EXPECT_EQ(sends.size(), static_cast<size_t>(2 * kPerRank));
  for (const TransferEvent& event : sends) EXPECT_THAT(event.status, IsOk());
  const TcpDataServer::Stats stats = plane->stats();
  EXPECT_GE(stats.evicted, 16);  // the flood did fill the handshake slots
  EXPECT_LE(stats.unauthenticated, TcpDataServerOptions().max_unauthenticated);

  // With the idle connections still open, a new puller's fresh connection still gets
  // in (it evicts the oldest idle one): the data plane carries its pull.
  ASSERT_TRUE(
      plane->AwaitStats([](const TcpDataServer::Stats& s) { return s.evicting == 0; }, kWait));
  auto gen2 = MakeRank("gen2 rank 0", {}, 0);
  ASSERT_NE(gen2, nullptr);
  BlockIds gen2_blocks(rng_);
  const TestBlocks last_sent = ctx_blocks.Take(RequestId(99), 17, d_);
  const TestBlocks last_received = gen2_blocks.Take(RequestId(98), 17, d_);
  ASSERT_THAT((*ctx)->StartSend(SendSpec{last_sent, 17, clock_.Now() + kWait}), IsOk());
  ASSERT_THAT((*gen2)->StartReceive(Receive(last_received, (*ctx)->address(), last_sent.id, kWait)),
              IsOk());
  const std::vector<TransferEvent> last = AwaitEvents(*gen2, 1, kWait);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_THAT(last[0].status, IsOk());
  EXPECT_THAT(CompareMovedBlocks(*ctx, last_sent, *gen2, last_received, d_), IsEmpty());
  EXPECT_EQ((*gen2)->pulls_over_tcp(), 1);
}

// The data plane serves one connection, which the test holds: the puller's fresh
// connection is refused (closed unanswered) and the pull goes over gRPC.
TEST_P(DataPlaneFloodTest, ARefusedDataPlaneConnectionFallsBackToGrpc) {
  SCOPED_TRACE(SeedTrace(seed_));
  auto ctx = MakeRank("ctx0 rank 0", {.max_connections = 1}, seed_ + 1);
  auto gen = MakeRank("gen0 rank 0", {}, 0);
  ASSERT_TRUE(ctx && gen);
  // The one connection served: a pull of no claim, answered NotFound; it stays open.
  TcpSocket held = Connect(*ctx);
  const std::string bytes = lockstep::v1::PullRequest().SerializeAsString();
  RequestPrefix prefix;
  prefix.request_bytes = static_cast<uint32_t>(bytes.size());
  const absl::Time deadline = absl::Now() + kWait;
  ASSERT_THAT(
      SendAll(held, {{&prefix, sizeof(prefix)}, {const_cast<char*>(bytes.data()), bytes.size()}},
              deadline, nullptr),
      IsOk());
  FrameHeader frame;
  ASSERT_THAT(RecvAll(held, &frame, sizeof(frame), deadline, nullptr), IsOk());
  ASSERT_EQ(frame.kind, FrameKind::kStatus);
  ASSERT_EQ((*ctx)->data_plane()->stats().authenticated, 1);

  BlockIds ctx_blocks(rng_);
  BlockIds gen_blocks(rng_);
  const TestBlocks sent = ctx_blocks.Take(RequestId(7), 23, d_);
  const TestBlocks received = gen_blocks.Take(RequestId(40), 23, d_);
  ASSERT_THAT((*ctx)->StartSend(SendSpec{sent, sent.num_tokens, clock_.Now() + kWait}), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, (*ctx)->address(), sent.id, kWait)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, IsOk());
  EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d_), IsEmpty());
  EXPECT_EQ((*gen)->pulls_over_tcp(), 0);
  EXPECT_EQ((*gen)->pulls_over_grpc(), 1);
  EXPECT_EQ((*gen)->pulls_fallen_back(), 1);
  EXPECT_GE((*ctx)->data_plane()->stats().refused, 1);
}

INSTANTIATE_TEST_SUITE_P(TcpDataPlane, DataPlaneFloodTest, ::testing::Values(true),
                         testing::TransportName);

}  // namespace
}  // namespace lockstep::transfer
