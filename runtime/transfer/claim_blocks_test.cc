// A claim that names pinned host KV tier copies of some target blocks (SendSpec::
// host_blocks): its chunks take those bytes from host memory and the rest through the
// pool's copier (CopyOutClaimBlocks), on gRPC and on the TCP data plane alike; the
// transfer counts what it read from host memory, and a claim that ends unpulled
// (cancelled, expired) lets go of the host copies.
#include "runtime/transfer/claim_blocks.h"

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/clock.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/testing/transfer_fixture.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using testing::AwaitEvents;
using testing::RandomBlocks;
using testing::SmallDescriptor;
using testing::TestBlocks;
using testing::TransportName;
using testing::TransportTest;
using ::testing::IsEmpty;

constexpr absl::Duration kWait = absl::Seconds(20);

std::shared_ptr<const std::vector<std::byte>> RandomBytes(size_t n, std::mt19937_64& rng) {
  auto bytes = std::make_shared<std::vector<std::byte>>(n);
  for (std::byte& b : *bytes) b = static_cast<std::byte>(rng() & 0xff);
  return bytes;
}

std::vector<std::byte> ReadBlock(kv::BlockCopier& copier, BlockId block) {
  std::vector<std::byte> bytes(copier.block_bytes());
  const kv::BlockSpan span{block, 0, bytes.size()};
  EXPECT_THAT(copier.CopyOut({&span, 1}, absl::MakeSpan(bytes)), IsOk());
  return bytes;
}

TEST(CopyOutClaimBlocksTest, HostCopiesAndDeviceRunsFillOneBuffer) {
  const kv::BlockLayout layout{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .tokens_per_block = 2};
  const size_t bb = layout.BlockBytes();  // 64 bytes
  std::mt19937_64 rng(3);
  std::vector<std::byte> slab = *RandomBytes(8 * bb, rng);
  kv::HostBlockCopier copier(slab.data(), layout, 8);
  kv::HostBlocks host;
  host.target = {nullptr, nullptr, RandomBytes(bb, rng), nullptr, RandomBytes(bb, rng)};
  // Table entries 1..4 (blocks 6, 0, 3, 5), the first from its middle, the last in part.
  const std::vector<kv::BlockSpan> spans = {
      {BlockId(6), bb / 2, bb / 2}, {BlockId(0), 0, bb}, {BlockId(3), 0, bb}, {BlockId(5), 0, 8}};
  std::vector<std::byte> out(bb / 2 + 2 * bb + 8);
  ASSERT_THAT(CopyOutClaimBlocks(copier, &host, 1, spans, absl::MakeSpan(out)), IsOk());
  std::vector<std::byte> want;
  want.insert(want.end(), slab.begin() + 6 * bb + bb / 2, slab.begin() + 7 * bb);
  want.insert(want.end(), host.target[2]->begin(), host.target[2]->end());
  want.insert(want.end(), slab.begin() + 3 * bb, slab.begin() + 4 * bb);
  want.insert(want.end(), host.target[4]->begin(), host.target[4]->begin() + 8);
  EXPECT_EQ(out, want);
  EXPECT_EQ(host.bytes_read.load(), static_cast<int64_t>(bb + 8));

  EXPECT_THAT(CopyOutClaimBlocks(copier, &host, 1, spans, absl::MakeSpan(out).first(8)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const kv::BlockSpan past{BlockId(0), bb - 4, 8};
  EXPECT_THAT(CopyOutClaimBlocks(copier, &host, 2, {&past, 1}, absl::MakeSpan(out).first(8)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

class ClaimBlocksTransferTest : public TransportTest {};

// The context rank's pools in fake device memory: the host-served blocks never go
// through its copier, the generation rank gets the host bytes for them and the pool's
// bytes for the rest.
TEST_P(ClaimBlocksTransferTest, APullReadsTheNamedBlocksFromTheHostCopies) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx0 rank 0", .descriptor = d, .device_memory = true}, seed_ + 1);
  auto gen = Rank({.name = "gen0 rank 1", .descriptor = d}, 0);
  ASSERT_TRUE(ctx && gen);
  // 23 tokens: 6 target blocks, the last partial; host copies of blocks 0, 1 and 3.
  const TestBlocks sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/true, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(40), 23, d, /*draft=*/true, 64, 0, rng_);
  const size_t bb = d.target->BlockBytes();
  auto host = std::make_shared<kv::HostBlocks>();
  host->target = {RandomBytes(bb, rng_), RandomBytes(bb, rng_), nullptr, RandomBytes(bb, rng_)};
  const int64_t out_before = ctx->device->bytes_out();
  SendSpec spec{sent, sent.num_tokens, clock_.Now() + absl::Minutes(1), host};
  ASSERT_THAT((*ctx)->StartSend(spec), IsOk());
  spec = {};
  ASSERT_THAT((*gen)->StartReceive(
                  Receive(received, (*ctx)->address(), sent.id, kWait)),
              IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status, IsOk());
  const std::vector<TransferEvent> ended = AwaitEvents(*ctx, 1, kWait);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_THAT(ended[0].status, IsOk());
  // Through the device copier: the 3 other target blocks and the 6 draft blocks.
  EXPECT_EQ(ctx->device->bytes_out() - out_before,
            static_cast<int64_t>(3 * bb + 6 * d.draft->BlockBytes()));

  for (size_t b = 0; b < 6; ++b) {
    const std::vector<std::byte> got_block = ReadBlock(gen->copier(kv::PoolKind::kTarget),
                                                       received.blocks[b]);
    if (const std::vector<std::byte>* h = host->Find(static_cast<int64_t>(b))) {
      EXPECT_EQ(got_block, *h) << "target block " << b << " (host copy)";
    } else {
      EXPECT_EQ(got_block, ReadBlock(ctx->copier(kv::PoolKind::kTarget), sent.blocks[b]))
          << "target block " << b;
    }
  }
  for (size_t b = 0; b < 6; ++b) {
    EXPECT_EQ(ReadBlock(gen->copier(kv::PoolKind::kDraft), received.draft_blocks[b]),
              ReadBlock(ctx->copier(kv::PoolKind::kDraft), sent.draft_blocks[b]))
        << "draft block " << b;
  }
  EXPECT_EQ(host->bytes_read.load(), static_cast<int64_t>(3 * bb));
  EXPECT_EQ((*gen)->pulls_over_tcp(), GetParam() ? 1 : 0);
  // The claim ended: nothing of the transfer holds the host copies any more.
  EXPECT_EQ(host.use_count(), 1);
}

TEST_P(ClaimBlocksTransferTest, AClaimEndingUnpulledLetsGoOfItsHostCopies) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = SmallDescriptor();
  auto ctx = Rank({.name = "ctx0 rank 0", .descriptor = d}, seed_ + 1);
  ASSERT_TRUE(ctx);
  const size_t bb = d.target->BlockBytes();
  auto cancelled = std::make_shared<kv::HostBlocks>();
  cancelled->target = {RandomBytes(bb, rng_)};
  auto expired = std::make_shared<kv::HostBlocks>();
  expired->target = {RandomBytes(bb, rng_)};
  const TestBlocks a = RandomBlocks(RequestId(7), 9, d, /*draft=*/false, 64, 0, rng_);
  const TestBlocks b = RandomBlocks(RequestId(8), 9, d, /*draft=*/false, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend({a, a.num_tokens, clock_.Now() + absl::Minutes(1), cancelled}),
              IsOk());
  ASSERT_THAT((*ctx)->StartSend({b, b.num_tokens, clock_.Now() + absl::Seconds(5), expired}),
              IsOk());
  EXPECT_GT(cancelled.use_count(), 1);
  EXPECT_GT(expired.use_count(), 1);
  (*ctx)->Cancel(a.id);
  clock_.Advance(absl::Seconds(6));
  const std::vector<TransferEvent> ended = AwaitEvents(*ctx, 2, kWait);
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_THAT(ended[0].status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(ended[1].status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(cancelled.use_count(), 1);
  EXPECT_EQ(expired.use_count(), 1);
  EXPECT_EQ(cancelled->bytes_read.load(), 0);
  EXPECT_THAT((*ctx)->Poll(), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Transports, ClaimBlocksTransferTest, ::testing::Bool(), TransportName);

}  // namespace
}  // namespace lockstep::transfer
