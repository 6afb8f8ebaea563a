// KvManager with host and disk tiers: evicted prefix blocks come back into fresh device
// blocks with their exact bytes, the onboarding copy waits for the batch fence, a
// released cache drops its pending onboard, a damaged disk block is never served, and
// the audit stays clean throughout.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"
#include "kvcache/testing/token_run.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::IsEmpty;

constexpr PoolKind kTarget = PoolKind::kTarget;
constexpr int kTpb = 2;

KvManagerConfig Config(int32_t blocks, int64_t host_blocks, int64_t disk_bytes = 0) {
  KvManagerConfig config;
  config.target.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = kTpb};
  config.target.num_blocks = blocks;
  config.target.reuse_salt = 77;
  config.tiers.host_bytes = host_blocks * static_cast<int64_t>(config.target.layout.BlockBytes());
  if (disk_bytes > 0) {
    config.tiers.disk_path = std::string(std::getenv("TEST_TMPDIR")) + "/kvdisk";
    config.tiers.disk_bytes = disk_bytes;
  }
  return config;
}

std::unique_ptr<KvManager> Make(const KvManagerConfig& config) {
  absl::StatusOr<std::unique_ptr<KvManager>> m = KvManager::Create(config);
  EXPECT_THAT(m, IsOk());
  return m.ok() ? std::move(*m) : nullptr;
}

// The KV a position holds: a function of the tokens up to it, as an engine's would be.
float Kv(const std::vector<int32_t>& tokens, size_t position, size_t element) {
  float v = 0;
  for (size_t i = 0; i <= position; ++i) v = v * 0.5f + static_cast<float>(tokens[i]);
  return v + static_cast<float>(element) * 1000.0f;
}

// Fills the KV of tokens [from, to) of `id`'s cache, as a forward pass would.
void Compute(KvManager& m, RequestId id, const std::vector<int32_t>& tokens, int64_t from,
             int64_t to) {
  const BlockLayout& layout = m.layout(kTarget);
  const size_t per_token = layout.BlockElements() / kTpb;
  for (int64_t p = from; p < to; ++p) {
    const BlockId block = m.BlockTable(id, kTarget)[p / kTpb];
    float* base =
        reinterpret_cast<float*>(m.Storage(kTarget) + block.value() * layout.BlockBytes());
    for (size_t e = 0; e < per_token; ++e) {
      base[(p % kTpb) * per_token + e] = Kv(tokens, static_cast<size_t>(p), e);
    }
  }
}

// Every position of [0, n) of `id`'s cache holds the KV of `tokens`.
void ExpectKv(const KvManager& m, RequestId id, const std::vector<int32_t>& tokens, int64_t n) {
  const BlockLayout& layout = m.layout(kTarget);
  const size_t per_token = layout.BlockElements() / kTpb;
  for (int64_t p = 0; p < n; ++p) {
    const BlockId block = m.BlockTable(id, kTarget)[p / kTpb];
    const float* base =
        reinterpret_cast<const float*>(m.Storage(kTarget) + block.value() * layout.BlockBytes());
    for (size_t e = 0; e < per_token; ++e) {
      ASSERT_EQ(base[(p % kTpb) * per_token + e], Kv(tokens, static_cast<size_t>(p), e))
          << "position " << p << " element " << e;
    }
  }
}

// A whole request: create (reusing), grow to the prompt, compute the rest, commit,
// release.
void Serve(KvManager& m, RequestId id, const std::vector<int32_t>& prompt) {
  absl::StatusOr<int64_t> reused = m.CreateCache(id, prompt);
  ASSERT_THAT(reused, IsOk());
  const int64_t n = static_cast<int64_t>(prompt.size());
  ASSERT_THAT(m.Resize(id, kTarget, n, n), IsOk());
  Compute(m, id, prompt, *reused, n);
  ASSERT_THAT(m.Commit(id, prompt), IsOk());
  EXPECT_THAT(m.Audit(m.Ids(kTarget), {}, false), IsEmpty());
  m.Release(id);
}

TEST(KvManagerTierTest, ValidationRejectsTiersWithADraftPoolOrWithoutReuse) {
  KvManagerConfig config = Config(8, 4);
  config.draft_mode = DraftMode::kUnpaired;
  config.draft = config.target;
  EXPECT_THAT(KvManager::Create(config).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  config = Config(8, 4);
  config.target.enable_prefix_reuse = false;
  EXPECT_THAT(KvManager::Create(config).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  config = Config(8, 4);
  config.tiers.disk_bytes = 100;
  EXPECT_THAT(KvManager::Create(config).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KvManagerTierTest, AnEvictedPrefixComesBackFromTheHostTierWithItsBytes) {
  std::unique_ptr<KvManager> m = Make(Config(6, 16));
  const std::vector<int32_t> a = Tokens(8, 100);  // 4 blocks
  Serve(*m, RequestId(1), a);
  Serve(*m, RequestId(2), Tokens(12, 500));  // 6 blocks: evicts every block of `a`
  EXPECT_EQ(m->ProbePrefix(a), 0);
  std::vector<int32_t> follow_up = a;
  follow_up.push_back(7);
  absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(3), follow_up);
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(*reused, 8);
  EXPECT_FALSE(m->OnboardPending(RequestId(3)));
  ExpectKv(*m, RequestId(3), a, 8);
  const CacheInfo info = *m->Info(RequestId(3), kTarget);
  EXPECT_EQ(info.history, 8);
  EXPECT_EQ(info.committed, 8);  // published again
  const ManagerStats stats = m->Stats();
  EXPECT_EQ(stats.onboarded_tokens, 8);
  EXPECT_EQ(stats.tiers.onboarded_blocks[static_cast<int>(Tier::kHost)], 4);
  EXPECT_THAT(m->Audit({RequestId(3)}, {}, false), IsEmpty());
  // A second request finds the onboarded prefix on the device now.
  EXPECT_EQ(m->ProbePrefix(follow_up), 8);
}

// Onboarding takes no block another cache holds: with `held` of the 6 blocks held by
// another request, a 4-block host hit brings back min(4, 6 - held) blocks; the prefill
// computes the rest.
TEST(KvManagerTierTest, OnboardingBringsBackWhatThePoolHasRoomFor) {
  for (int held = 0; held <= 6; ++held) {
    SCOPED_TRACE(::testing::Message() << "held " << held);
    std::unique_ptr<KvManager> m = Make(Config(6, 16));
    const std::vector<int32_t> a = Tokens(8, 100);  // 4 blocks
    Serve(*m, RequestId(1), a);
    Serve(*m, RequestId(2), Tokens(12, 500));  // 6 blocks: evicts every block of `a`
    ASSERT_THAT(m->CreateCache(RequestId(9), Tokens(2 * held, 900)), IsOk());
    ASSERT_THAT(m->Resize(RequestId(9), kTarget, 2 * held, 2 * held), IsOk());
    std::vector<int32_t> follow_up = a;
    follow_up.push_back(7);
    absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(3), follow_up);
    ASSERT_THAT(reused, IsOk());
    const int64_t blocks = std::min(4, 6 - held);
    EXPECT_EQ(*reused, 2 * blocks);
    EXPECT_EQ(m->Info(RequestId(3), kTarget)->committed, 2 * blocks);
    ExpectKv(*m, RequestId(3), a, 2 * blocks);
    EXPECT_EQ(m->Stats().tiers.onboarded_blocks[static_cast<int>(Tier::kHost)], blocks);
    EXPECT_THAT(m->Audit({RequestId(3), RequestId(9)}, {}, false), IsEmpty());
  }
}

TEST(KvManagerTierTest, DeviceReuseThenTierReuseContinueOneChain) {
  std::unique_ptr<KvManager> m = Make(Config(6, 16));
  const std::vector<int32_t> a = Tokens(8, 100);
  Serve(*m, RequestId(1), a);
  // 5 blocks: evicts the 4 LRU blocks of `a`... the deepest first, so the first block
  // of `a` is the last to go; keep it by holding it.
  ASSERT_THAT(m->CreateCache(RequestId(9), Tokens(3, 100)), IsOk());  // holds block 0 of a
  Serve(*m, RequestId(2), Tokens(10, 500));
  std::vector<int32_t> follow_up = a;
  follow_up.push_back(7);
  EXPECT_EQ(m->ProbePrefix(follow_up), 2);
  absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(3), follow_up);
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(*reused, 8);
  ExpectKv(*m, RequestId(3), a, 8);
  EXPECT_THAT(m->Audit({RequestId(3), RequestId(9)}, {}, false), IsEmpty());
}

TEST(KvManagerTierTest, OnboardingWaitsForTheBatchFence) {
  std::unique_ptr<KvManager> m = Make(Config(6, 16));
  const std::vector<int32_t> a = Tokens(8, 100);
  Serve(*m, RequestId(1), a);
  Serve(*m, RequestId(2), Tokens(12, 500));
  m->OnBatchLaunched();  // a batch in flight may still read the fresh blocks
  std::vector<int32_t> follow_up = a;
  follow_up.push_back(7);
  absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(3), follow_up);
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(*reused, 8);
  EXPECT_TRUE(m->OnboardPending(RequestId(3)));
  EXPECT_EQ(m->Info(RequestId(3), kTarget)->history, 8);    // admission sees the blocks
  EXPECT_EQ(m->Info(RequestId(3), kTarget)->committed, 0);  // not published yet
  EXPECT_EQ(m->ProbePrefix(follow_up), 0);
  EXPECT_THAT(m->Audit({RequestId(3)}, {}, false), IsEmpty());
  m->OnBatchCollected();
  EXPECT_FALSE(m->OnboardPending(RequestId(3)));
  ExpectKv(*m, RequestId(3), a, 8);
  EXPECT_EQ(m->Info(RequestId(3), kTarget)->committed, 8);
  EXPECT_THAT(m->Audit({RequestId(3)}, {}, false), IsEmpty());
}

TEST(KvManagerTierTest, ReleasingAPendingOnboardLeavesNothingBehind) {
  std::unique_ptr<KvManager> m = Make(Config(6, 16));
  const std::vector<int32_t> a = Tokens(8, 100);
  Serve(*m, RequestId(1), a);
  Serve(*m, RequestId(2), Tokens(12, 500));
  const PoolStats before = m->Stats().target;
  m->OnBatchLaunched();
  std::vector<int32_t> follow_up = a;
  follow_up.push_back(7);
  ASSERT_THAT(m->CreateCache(RequestId(3), follow_up), IsOk());
  m->Release(RequestId(3));  // a vetoed step's rollback
  EXPECT_FALSE(m->OnboardPending(RequestId(3)));
  EXPECT_EQ(m->Stats().target.used_blocks, before.used_blocks);
  // The freed blocks go to someone else before the fence; the dropped onboard never
  // writes into them.
  const std::vector<int32_t> b = Tokens(12, 900);
  ASSERT_THAT(m->CreateCache(RequestId(4), b), IsOk());
  ASSERT_THAT(m->Resize(RequestId(4), kTarget, 12, 12), IsOk());
  Compute(*m, RequestId(4), b, 0, 12);
  m->OnBatchCollected();
  ExpectKv(*m, RequestId(4), b, 12);
  EXPECT_THAT(m->Audit({RequestId(4)}, {}, false), IsEmpty());
}

TEST(KvManagerTierTest, ADamagedDiskBlockIsRecomputedNeverServed) {
  // Host: 1 block; disk: plenty. `a`'s blocks spill to disk.
  std::unique_ptr<KvManager> m = Make(Config(6, 1, 1 << 20));
  const std::vector<int32_t> a = Tokens(8, 100);
  Serve(*m, RequestId(1), a);
  Serve(*m, RequestId(2), Tokens(12, 500));
  EXPECT_THAT(m->FlushTiers(), IsOk());
  EXPECT_GE(m->Stats().tiers.disk_blocks, 3);
  // Damage the slot of a's second block (the last byte of its payload): onboarding
  // stops after the first.
  const size_t block_bytes = Config(6, 1).target.layout.BlockBytes();
  const size_t slot_bytes = TierFileBytes(kTpb, block_bytes);
  const size_t record = 48 + kTpb * sizeof(int32_t) + block_bytes;
  int files = 0;
  int damaged = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(Config(6, 1, 1).tiers.disk_path)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    const std::vector<int32_t> want = {102, 103};
    for (size_t offset = 0; offset + slot_bytes <= entry.file_size(); offset += slot_bytes) {
      std::vector<char> slot(record);
      f.seekg(static_cast<std::streamoff>(offset));
      ASSERT_TRUE(f.read(slot.data(), static_cast<std::streamsize>(record)));
      if (std::memcmp(slot.data() + 48, want.data(), 8) != 0) continue;
      slot.back() ^= 1;
      f.seekp(static_cast<std::streamoff>(offset));
      ASSERT_TRUE(f.write(slot.data(), static_cast<std::streamsize>(record)));
      ++damaged;
    }
  }
  ASSERT_EQ(files, 1) << "one file per rank";
  ASSERT_EQ(damaged, 1);
  std::vector<int32_t> follow_up = a;
  follow_up.push_back(7);
  absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(3), follow_up);
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(*reused, 2);
  EXPECT_EQ(m->Stats().tiers.disk_corrupt, 1);
  ExpectKv(*m, RequestId(3), a, 2);
  EXPECT_THAT(m->Audit({RequestId(3)}, {}, false), IsEmpty());
}

}  // namespace
}  // namespace lockstep::kv
