// GrpcTransceiver over real gRPC on 127.0.0.1:0: a context rank and generation ranks,
// each with its own KV slabs, in one process. Normal operation, compatibility checks,
// claim leases and argument checks; faults are in grpc_transceiver_fault_test.cc.
#include "runtime/transfer/grpc_transceiver.h"

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/testing/transfer_fixture.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using testing::AwaitEvents;
using testing::CompareMovedBlocks;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RandomBlocks;
using testing::RankConfig;
using testing::SmallDescriptor;
using testing::TestBlocks;
using testing::TestRank;
using testing::TouchedOutside;
using testing::TransportName;
using testing::TransportTest;

constexpr absl::Duration kWait = absl::Seconds(20);

class GrpcTransceiverTest : public TransportTest {};

TEST_P(GrpcTransceiverTest, MovesTargetAndDraftBlocksBitExact) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx0 rank 0", .descriptor = d}, seed_ + 1);
  auto gen = Rank({.name = "gen0 rank 1", .descriptor = d}, 0);
  ASSERT_TRUE(ctx && gen);
  // 23 tokens: 5 full blocks and a partial one in each pool; the generation side
  // allocated two more blocks than move.
  const TestBlocks sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/true, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(40), 23, d, /*draft=*/true, 64, 2, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  EXPECT_EQ((*ctx)->InFlight(), 1);
  EXPECT_EQ((*gen)->InFlight(), 1);

  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, TransferKind::kReceive);
  EXPECT_EQ(got[0].id, received.id);
  EXPECT_EQ(got[0].generation, received.generation);
  EXPECT_THAT(got[0].status, IsOk());
  const std::vector<TransferEvent> sent_events = AwaitEvents(*ctx, 1, kWait);
  ASSERT_EQ(sent_events.size(), 1u);
  EXPECT_EQ(sent_events[0].kind, TransferKind::kSend);
  EXPECT_EQ(sent_events[0].id, sent.id);
  EXPECT_EQ(sent_events[0].generation, sent.generation);
  EXPECT_THAT(sent_events[0].status, IsOk());

  EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d), IsEmpty());
  EXPECT_THAT(TouchedOutside(*gen, {received}, d), IsEmpty());  // only the named blocks
  // The transport the parameter names carried it.
  EXPECT_EQ((*ctx)->data_plane_address().empty(), !GetParam());
  EXPECT_EQ((*gen)->pulls_over_tcp(), GetParam() ? 1 : 0);
  EXPECT_EQ((*gen)->pulls_over_grpc(), GetParam() ? 0 : 1);
  EXPECT_THAT((*gen)->Poll(), IsEmpty());
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());
  EXPECT_EQ((*ctx)->InFlight(), 0);
  EXPECT_EQ((*gen)->InFlight(), 0);
}

// Both ranks' pools in fake device memory (an address range any direct access crashes,
// reached only through the copiers): the transfer works unchanged, through the copiers
// alone, with bf16 blocks and some of them larger than a chunk.
TEST_P(GrpcTransceiverTest, MovesDevicePoolsThroughTheCopiersOnly) {
  SCOPED_TRACE(SeedTrace(seed_));
  KvDescriptor d = SmallDescriptor();
  d.dtype = "bf16";
  d.target->element_bytes = 2;
  d.target->head_dim = 128;  // 8 KiB blocks in 4 KiB chunks; 256 B draft blocks
  d.draft->element_bytes = 2;
  auto ctx = Rank({.name = "ctx0 rank 0", .descriptor = d, .device_memory = true}, seed_ + 1);
  auto gen = Rank({.name = "gen0 rank 1", .descriptor = d, .device_memory = true}, 0);
  ASSERT_TRUE(ctx && gen);
  ASSERT_NE(ctx->device, nullptr);
  EXPECT_EQ(ctx->kv->memory_kind(), kv::MemoryKind::kDevice);
  const int64_t out_before = ctx->device->copy_out_calls();
  const int64_t in_before = gen->device->copy_in_calls();
  const int64_t bytes_before = gen->device->bytes_in();
  const TestBlocks sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/true, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(40), 23, d, /*draft=*/true, 64, 1, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, IsOk());
  ASSERT_EQ(AwaitEvents(*ctx, 1, kWait).size(), 1u);

  // 6 target blocks of 8 KiB and 6 draft blocks of 256 B went out and in through the
  // copiers (one call per chunk: 12 target chunks, 1 draft chunk).
  ASSERT_EQ(d.target->BlockBytes(), 8192u);
  ASSERT_EQ(d.draft->BlockBytes(), 256u);
  const int64_t bytes = 6 * 8192 + 6 * 256;
  EXPECT_EQ(ctx->device->copy_out_calls() - out_before, 13);
  EXPECT_EQ(gen->device->copy_in_calls() - in_before, 13);
  EXPECT_EQ(gen->device->bytes_in() - bytes_before, bytes);
  EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d), IsEmpty());
  EXPECT_THAT(TouchedOutside(*gen, {received}, d), IsEmpty());
  EXPECT_EQ((*gen)->pulls_over_tcp(), GetParam() ? 1 : 0);
}

// Blocks of 32 KiB in chunks of 4 KiB: each block is split over 8 chunks, its checksum
// travelling with the last; and a rank without a draft pool.
TEST_P(GrpcTransceiverTest, SplitsBlocksLargerThanAChunk) {
  SCOPED_TRACE(SeedTrace(seed_));
  KvDescriptor d = SmallDescriptor();
  d.target->head_dim = 64;
  d.target->tokens_per_block = 16;  // 2 x 2 x 2 x 16 x 64 floats = 32 KiB
  d.draft.reset();
  auto ctx = Rank({.name = "ctx", .descriptor = d, .num_blocks = 12}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d, .num_blocks = 12}, 0);
  ASSERT_TRUE(ctx && gen);
  const TestBlocks sent = RandomBlocks(RequestId(1), 70, d, false, 12, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(2), 70, d, false, 12, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, IsOk());
  ASSERT_EQ(AwaitEvents(*ctx, 1, kWait).size(), 1u);
  EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d), IsEmpty());
  EXPECT_THAT(TouchedOutside(*gen, {received}, d), IsEmpty());
}

// Many transfers at once, more than the receive threads and the serving turns, to two
// generation ranks: every one completes bit-exact with exactly one event per side.
TEST_P(GrpcTransceiverTest, ManyConcurrentTransfers) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx", .descriptor = d, .num_blocks = 512, .max_concurrent_pulls = 3},
                  seed_ + 1);
  std::vector<std::unique_ptr<TestRank>> gens;
  for (int g = 0; g < 2; ++g) {
    gens.push_back(Rank({.name = absl::StrCat("gen rank ", g),
                         .descriptor = d,
                         .num_blocks = 512,
                         .max_concurrent_receives = 3},
                        0));
    ASSERT_TRUE(gens.back());
  }
  ASSERT_TRUE(ctx);
  constexpr int kRequests = 24;
  std::vector<TestBlocks> sent, received;
  std::vector<std::vector<TestBlocks>> per_gen(2);
  // Disjoint tables on each side: carve the ids of a shuffled pool.
  std::vector<BlockId> ctx_ids = testing::RandomTable(512, 512, rng_);
  std::vector<std::vector<BlockId>> gen_ids = {testing::RandomTable(512, 512, rng_),
                                               testing::RandomTable(512, 512, rng_)};
  size_t ctx_next = 0;
  std::vector<size_t> gen_next(2, 0);
  auto take = [](std::vector<BlockId>& ids, size_t& next, int64_t n) {
    std::vector<BlockId> out(ids.begin() + next, ids.begin() + next + n);
    next += n;
    return out;
  };
  for (int r = 0; r < kRequests; ++r) {
    const int64_t tokens = 1 + static_cast<int64_t>(rng_() % 40);
    const int64_t target = d.target->BlocksFor(tokens);
    const int64_t draft = d.draft->BlocksFor(tokens);
    const bool with_draft = r % 3 != 0;
    TestBlocks s{{RequestId(100 + r), 10, take(ctx_ids, ctx_next, target), with_draft ? 20u : 0u},
                 tokens};
    if (with_draft) s.draft_blocks = take(ctx_ids, ctx_next, draft);
    const int g = r % 2;
    TestBlocks v{
        {RequestId(500 + r), 30, take(gen_ids[g], gen_next[g], target), with_draft ? 40u : 0u},
        tokens};
    if (with_draft) v.draft_blocks = take(gen_ids[g], gen_next[g], draft);
    ASSERT_THAT((*ctx)->StartSend(Send(s)), IsOk());
    ASSERT_THAT((*gens[g])->StartReceive(Receive(v, *ctx, s.id)), IsOk());
    sent.push_back(s);
    received.push_back(v);
    per_gen[g].push_back(v);
  }
  absl::flat_hash_map<RequestId, int> receive_events, send_events;
  for (int g = 0; g < 2; ++g) {
    for (const TransferEvent& e : AwaitEvents(*gens[g], per_gen[g].size(), kWait)) {
      EXPECT_EQ(e.kind, TransferKind::kReceive);
      EXPECT_THAT(e.status, IsOk()) << "request " << e.id;
      ++receive_events[e.id];
    }
  }
  for (const TransferEvent& e : AwaitEvents(*ctx, kRequests, kWait)) {
    EXPECT_EQ(e.kind, TransferKind::kSend);
    EXPECT_THAT(e.status, IsOk()) << "request " << e.id;
    ++send_events[e.id];
  }
  ASSERT_EQ(receive_events.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(send_events.size(), static_cast<size_t>(kRequests));
  for (int r = 0; r < kRequests; ++r) {
    EXPECT_EQ(receive_events[received[r].id], 1);
    EXPECT_EQ(send_events[sent[r].id], 1);
    EXPECT_THAT(CompareMovedBlocks(*ctx, sent[r], *gens[r % 2], received[r], d), IsEmpty());
  }
  for (int g = 0; g < 2; ++g) {
    EXPECT_THAT(TouchedOutside(*gens[g], per_gen[g], d), IsEmpty());
    EXPECT_EQ((*gens[g])->InFlight(), 0);
  }
  EXPECT_EQ((*ctx)->InFlight(), 0);
}

// A descriptor mismatch fails the receive and ends the claim, both with
// FailedPrecondition naming the field and both values.
TEST_P(GrpcTransceiverTest, IncompatibleRanksFailNamingTheField) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx", .descriptor = d}, seed_ + 1);
  ASSERT_TRUE(ctx);
  struct Case {
    std::function<void(KvDescriptor&)> mutate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](KvDescriptor& g) { g.model = "other"; },
       "model: context 'tiny-moe-test', generation 'other'"},
      {[](KvDescriptor& g) {
         g.dtype = "bf16";
         g.target->element_bytes = 2;
         g.draft->element_bytes = 2;
       },
       "dtype: context f32, generation bf16"},
      {[](KvDescriptor& g) { g.target->tokens_per_block = 8; },
       "tokens_per_block: context 4, generation 8"},
      {[](KvDescriptor& g) { g.target->num_layers = 1; }, "num_layers: context 2, generation 1"},
      {[](KvDescriptor& g) { g.target->num_kv_heads = 1; },
       "num_kv_heads: context 2, generation 1"},
      {[](KvDescriptor& g) { g.target->head_dim = 4; }, "head_dim: context 8, generation 4"},
      {[](KvDescriptor& g) { g.draft->num_layers = 2; },
       "draft num_layers: context 1, generation 2"},
  };
  int64_t id = 1;
  for (const Case& c : cases) {
    KvDescriptor theirs = d;
    c.mutate(theirs);
    auto gen = Rank({.name = "gen", .descriptor = theirs}, 0);
    ASSERT_TRUE(gen);
    const TestBlocks sent = RandomBlocks(RequestId(id), 9, d, false, 64, 0, rng_);
    const TestBlocks received = RandomBlocks(RequestId(id), 9, theirs, false, 64, 0, rng_);
    ++id;
    ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
    ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
    const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
    ASSERT_EQ(got.size(), 1u) << c.message;
    EXPECT_THAT(got[0].status,
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.message)));
    const std::vector<TransferEvent> ended = AwaitEvents(*ctx, 1, kWait);
    ASSERT_EQ(ended.size(), 1u) << c.message;
    EXPECT_EQ(ended[0].id, sent.id);
    EXPECT_THAT(ended[0].status,
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.message)));
  }
  EXPECT_EQ((*ctx)->InFlight(), 0);
}

// A generation rank without a draft pool (no speculation, or a drafter without KV)
// behind a context rank with one pulls the target KV alone: the context rank leaves
// the draft blocks behind and its claim ends as a successful send.
TEST_P(GrpcTransceiverTest, GenerationWithoutDraftPoolPullsTheTargetKvAlone) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  KvDescriptor no_draft = d;
  no_draft.draft.reset();
  auto ctx = Rank({.name = "ctx0 rank 0", .descriptor = d}, seed_ + 1);
  auto gen = Rank({.name = "gen0 rank 0", .descriptor = no_draft}, 0);
  ASSERT_TRUE(ctx && gen);
  const TestBlocks sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/true, 64, 0, rng_);
  const TestBlocks received =
      RandomBlocks(RequestId(40), 23, no_draft, /*draft=*/false, 64, 1, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, IsOk());
  const std::vector<TransferEvent> ended = AwaitEvents(*ctx, 1, kWait);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].id, sent.id);
  EXPECT_THAT(ended[0].status, IsOk());
  TestBlocks sent_target = sent;
  sent_target.draft_generation = 0;
  sent_target.draft_blocks.clear();
  EXPECT_THAT(CompareMovedBlocks(*ctx, sent_target, *gen, received, no_draft), IsEmpty());
  EXPECT_THAT(TouchedOutside(*gen, {received}, no_draft), IsEmpty());
  EXPECT_EQ((*ctx)->InFlight(), 0);
  EXPECT_EQ((*gen)->InFlight(), 0);
}

// The request's shape must match too: its prompt length and whether it has draft KV.
TEST_P(GrpcTransceiverTest, RequestShapeMismatchFails) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx", .descriptor = d}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d}, 0);
  ASSERT_TRUE(ctx && gen);
  const TestBlocks sent = RandomBlocks(RequestId(1), 10, d, true, 64, 0, rng_);
  TestBlocks longer = RandomBlocks(RequestId(2), 11, d, true, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(longer, *ctx, sent.id)), IsOk());
  std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("num_tokens: context 10, generation 11")));
  ASSERT_EQ(AwaitEvents(*ctx, 1, kWait).size(), 1u);

  const TestBlocks sent2 = RandomBlocks(RequestId(3), 10, d, true, 64, 0, rng_);
  const TestBlocks no_draft = RandomBlocks(RequestId(4), 10, d, false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent2)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(no_draft, *ctx, sent2.id)), IsOk());
  got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("draft cache: context present, generation absent")));
  ASSERT_EQ(AwaitEvents(*ctx, 1, kWait).size(), 1u);
}

// An unpulled claim ends exactly once when its lease passes (on the injected clock, at
// Poll); a later pull finds nothing.
TEST_P(GrpcTransceiverTest, LeaseExpiryReleasesTheClaimOnce) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx", .descriptor = d}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d}, 0);
  ASSERT_TRUE(ctx && gen);
  const TestBlocks sent = RandomBlocks(RequestId(5), 10, d, true, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent, absl::Seconds(5))), IsOk());
  clock_.Advance(absl::Seconds(4));
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());
  clock_.Advance(absl::Seconds(1));
  std::vector<TransferEvent> ended = (*ctx)->Poll();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].id, sent.id);
  EXPECT_EQ(ended[0].generation, sent.generation);
  EXPECT_THAT(ended[0].status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  clock_.Advance(absl::Seconds(10));
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());
  EXPECT_EQ((*ctx)->InFlight(), 0);

  const TestBlocks received = RandomBlocks(RequestId(6), 10, d, true, 64, 0, rng_);
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, StatusIs(absl::StatusCode::kNotFound, HasSubstr("no transfer claim")));
  EXPECT_THAT(TouchedOutside(*gen, {}, d), IsEmpty());  // nothing written
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());
}

// A pull that arrives after the lease passed, before any Poll noticed, is refused and
// ends the claim then (still once).
TEST_P(GrpcTransceiverTest, PullAfterLeaseEndsTheClaimOnce) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx", .descriptor = d}, seed_ + 1);
  auto gen = Rank({.name = "gen", .descriptor = d}, 0);
  ASSERT_TRUE(ctx && gen);
  const TestBlocks sent = RandomBlocks(RequestId(5), 10, d, false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent, absl::Seconds(5))), IsOk());
  clock_.Advance(absl::Seconds(6));
  const TestBlocks received = RandomBlocks(RequestId(6), 10, d, false, 64, 0, rng_);
  ASSERT_THAT((*gen)->StartReceive(Receive(received, *ctx, sent.id)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, StatusIs(absl::StatusCode::kNotFound, HasSubstr("expired")));
  const std::vector<TransferEvent> ended = AwaitEvents(*ctx, 1, kWait);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_THAT(ended[0].status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());
  EXPECT_EQ((*ctx)->InFlight(), 0);
}

TEST_P(GrpcTransceiverTest, CancelBeforeAnyPullEndsAtOnce) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx", .descriptor = d}, seed_ + 1);
  ASSERT_TRUE(ctx);
  const TestBlocks sent = RandomBlocks(RequestId(5), 10, d, false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  (*ctx)->Cancel(sent.id);
  (*ctx)->Cancel(sent.id);  // already ended: nothing more
  (*ctx)->Cancel(RequestId(999));
  const std::vector<TransferEvent> ended = (*ctx)->Poll();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_THAT(ended[0].status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());
  EXPECT_EQ((*ctx)->InFlight(), 0);
}

TEST_P(GrpcTransceiverTest, RejectsBadArgumentsWithoutStarting) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto rank = Rank({.name = "r", .descriptor = d, .num_blocks = 16}, 0);
  ASSERT_TRUE(rank);
  TestBlocks ok = RandomBlocks(RequestId(1), 10, d, true, 16, 0, rng_);
  ASSERT_THAT((*rank)->StartSend(Send(ok)), IsOk());
  EXPECT_THAT((*rank)->StartSend(Send(ok)), StatusIs(absl::StatusCode::kAlreadyExists));

  TestBlocks outside = ok;
  outside.id = RequestId(2);
  outside.blocks[1] = BlockId(16);
  EXPECT_THAT((*rank)->StartSend(Send(outside)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the pool")));
  TestBlocks short_table = ok;
  short_table.id = RequestId(3);
  short_table.draft_blocks.pop_back();
  EXPECT_THAT((*rank)->StartSend(Send(short_table)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("draft table has 2 blocks")));
  TestBlocks empty = ok;
  empty.id = RequestId(4);
  empty.num_tokens = 0;
  EXPECT_THAT((*rank)->StartSend(Send(empty)), StatusIs(absl::StatusCode::kInvalidArgument));
  ReceiveSpec no_address = Receive(ok, *rank, RequestId(1));
  no_address.blocks.id = RequestId(5);
  no_address.source.address.clear();
  EXPECT_THAT((*rank)->StartReceive(no_address),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no KV transfer address")));
  EXPECT_EQ((*rank)->InFlight(), 1);

  GrpcTransceiverOptions bad;
  bad.name = "x";
  bad.descriptor = d;
  EXPECT_THAT(GrpcTransceiver::Create(bad, &clock_).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no copier")));
}

INSTANTIATE_TEST_SUITE_P(Transports, GrpcTransceiverTest, ::testing::Bool(), TransportName);

}  // namespace
}  // namespace lockstep::transfer
