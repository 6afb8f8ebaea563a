// GPU check: a KV transfer between two pools in real device memory
// (DeviceBlockAllocator), over the TCP data plane and over gRPC on loopback. The
// transfer path reaches blocks only through the pools' copiers, so the same transceiver
// that moves host pools moves device pools; the moved blocks must be bit-exact and no
// other block of the receiving pool may change. Skips without a GPU (gpu_test_env.h).
#include <memory>

#include "common/ids.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/memory_kind.h"
#include "runtime/cuda/device_block_allocator.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/testing/transfer_fixture.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::testing::IsEmpty;
using testing::AwaitEvents;
using testing::CompareMovedBlocks;
using testing::RandomBlocks;
using testing::RankConfig;
using testing::SmallDescriptor;
using testing::TestBlocks;
using testing::TouchedOutside;
using testing::TransportName;
using testing::TransportTest;

constexpr absl::Duration kWait = absl::Seconds(30);

class DeviceKvTransferTest : public TransportTest {};

TEST_P(DeviceKvTransferTest, MovesBlocksBetweenTwoDevicePoolsBitExact) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  SCOPED_TRACE(SeedTrace(seed_));
  // bf16 with head_dim 128 (a real model's row size): 8 KiB target blocks, larger than a
  // 4 KiB chunk, so blocks are split over chunks; 1 KiB draft blocks.
  KvDescriptor d = SmallDescriptor();
  d.dtype = "bf16";
  d.target->element_bytes = 2;
  d.target->head_dim = 128;
  d.draft->element_bytes = 2;
  d.draft->head_dim = 32;
  const auto on_device = [] { return std::make_unique<cuda::DeviceBlockAllocator>(0); };
  RankConfig ctx_config{.name = "ctx0 rank 0", .descriptor = d, .num_blocks = 256};
  ctx_config.make_allocator = on_device;
  RankConfig gen_config{.name = "gen0 rank 0", .descriptor = d, .num_blocks = 256};
  gen_config.make_allocator = on_device;
  auto ctx = Rank(ctx_config, seed_ + 1);
  auto gen = Rank(gen_config, 0);
  ASSERT_TRUE(ctx && gen);
  ASSERT_EQ(ctx->kv->memory_kind(), kv::MemoryKind::kDevice);
  ASSERT_EQ(gen->kv->memory_kind(), kv::MemoryKind::kDevice);

  // Three requests at once, 61, 200 and 1000 tokens (the last one spans 250 blocks).
  const int64_t tokens[] = {61, 200, 1000};
  std::vector<TestBlocks> received;
  for (int i = 0; i < 3; ++i) {
    const TestBlocks sent =
        RandomBlocks(RequestId(10 + i), tokens[i], d, /*draft=*/true, 256, 0, rng_);
    TestBlocks into = RandomBlocks(RequestId(20 + i), tokens[i], d, /*draft=*/true, 256, 0, rng_);
    ASSERT_THAT((*ctx)->StartSend(SendSpec{sent, sent.num_tokens, clock_.Now() + kWait}),
                IsOk());
    ASSERT_THAT((*gen)->StartReceive(Receive(into, ctx->transceiver->address(), sent.id, kWait)),
                IsOk());
    const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_THAT(got[0].status, IsOk());
    ASSERT_EQ(AwaitEvents(*ctx, 1, kWait).size(), 1u);
    EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, into, d), IsEmpty());
    received.push_back(into);
  }
  EXPECT_THAT(TouchedOutside(*gen, received, d), IsEmpty());
  EXPECT_EQ((*gen)->pulls_over_tcp(), GetParam() ? 3 : 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceKvTransferTest, ::testing::Bool(), TransportName);

}  // namespace
}  // namespace lockstep::transfer
