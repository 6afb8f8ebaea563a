// Host tier pins for transfer claims (tier_pins.h) through KvManager: a context leg's
// prefix brought back from the host tier is pinned at hand-off with its exact bytes,
// pinned entries survive host tier pressure, pins stay within half the host capacity,
// Release drops them and counts what the transfer read, and the audit balances the pins
// against live and claimed requests.
#include <cstring>
#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"
#include "kvcache/prefix_hash.h"
#include "kvcache/testing/token_run.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr PoolKind kTarget = PoolKind::kTarget;
constexpr int kTpb = 2;

std::unique_ptr<KvManager> Make(int32_t blocks, int64_t host_blocks) {
  KvManagerConfig config;
  config.target.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = kTpb};
  config.target.num_blocks = blocks;
  config.target.reuse_salt = 5;
  config.tiers.host_bytes = host_blocks * static_cast<int64_t>(config.target.layout.BlockBytes());
  absl::StatusOr<std::unique_ptr<KvManager>> m = KvManager::Create(config);
  EXPECT_THAT(m, IsOk());
  return m.ok() ? std::move(*m) : nullptr;
}

// The bytes block `block` of a cache holding `tokens` has: position p's elements are
// p's token plus the element index (what Fill writes).
std::vector<std::byte> Expected(const KvManager& m, const std::vector<int32_t>& tokens,
                                int64_t block) {
  const size_t per_token = m.layout(kTarget).BlockElements() / kTpb;
  std::vector<float> v;
  for (int64_t p = block * kTpb; p < (block + 1) * kTpb; ++p) {
    for (size_t e = 0; e < per_token; ++e) v.push_back(static_cast<float>(tokens[p] + e));
  }
  std::vector<std::byte> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// Creates `id`'s cache for `prompt` (reusing), grows it to the prompt, writes the KV of
// the positions it did not reuse and commits.
void Prefill(KvManager& m, RequestId id, const std::vector<int32_t>& prompt) {
  absl::StatusOr<int64_t> reused = m.CreateCache(id, prompt);
  ASSERT_THAT(reused, IsOk());
  const int64_t n = static_cast<int64_t>(prompt.size());
  ASSERT_THAT(m.Resize(id, kTarget, n, n), IsOk());
  const size_t block_bytes = m.layout(kTarget).BlockBytes();
  for (int64_t b = *reused / kTpb; b < n / kTpb; ++b) {
    const std::vector<std::byte> bytes = Expected(m, prompt, b);
    std::memcpy(m.Storage(kTarget) + m.BlockTable(id, kTarget)[b].value() * block_bytes,
                bytes.data(), block_bytes);
  }
  ASSERT_THAT(m.Commit(id, prompt), IsOk());
}

void Serve(KvManager& m, RequestId id, const std::vector<int32_t>& prompt) {
  Prefill(m, id, prompt);
  m.Release(id);
}

// The context leg of `prompt` after its blocks were evicted to the host tier: id 3
// holds the prompt plus one token, its prefix brought back from the host tier.
std::vector<int32_t> LegAfterEviction(KvManager& m, const std::vector<int32_t>& prompt) {
  Serve(m, RequestId(1), prompt);
  // The whole pool: evicts every block of `prompt`.
  Serve(m, RequestId(2), Tokens(m.num_blocks(kTarget) * kTpb, 500));
  std::vector<int32_t> leg = prompt;
  leg.push_back(7);
  Prefill(m, RequestId(3), leg);
  EXPECT_EQ(m.Stats().tiers.onboarded_blocks[static_cast<int>(Tier::kHost)],
            static_cast<int64_t>(prompt.size()) / kTpb);
  return leg;
}

// Given the request's prefix keys (made once, at admission), the hand-off hashes
// nothing and pins what hashing the prompt pins; stale keys are refused, and keys of
// another prompt pin nothing (each pin also compares parent and tokens).
TEST(TierPinsTest, HandOffGivenThePrefixKeysPinsWhatHashingPins) {
  std::unique_ptr<KvManager> m = Make(6, 16);
  const std::vector<int32_t> a = Tokens(8, 100);  // 4 blocks
  const std::vector<int32_t> leg = LegAfterEviction(*m, a);
  PrefixKeys stale;
  m->HashPrefix(absl::MakeConstSpan(leg).first(4), &stale);
  EXPECT_THAT(m->PinHostBlocks(RequestId(3), leg, stale),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stale keys")));
  PrefixKeys other;
  m->HashPrefix(Tokens(9, 300), &other);
  absl::StatusOr<std::shared_ptr<const HostBlocks>> none =
      m->PinHostBlocks(RequestId(3), leg, other);
  ASSERT_THAT(none, IsOk());
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 0);
  PrefixKeys keys;
  m->HashPrefix(leg, &keys);
  absl::StatusOr<std::shared_ptr<const HostBlocks>> host =
      m->PinHostBlocks(RequestId(3), leg, keys);
  ASSERT_THAT(host, IsOk());
  ASSERT_NE(*host, nullptr);
  ASSERT_EQ((*host)->target.size(), 4u);
  for (int64_t b = 0; b < 4; ++b) {
    ASSERT_NE((*host)->Find(b), nullptr) << "block " << b;
    EXPECT_EQ(*(*host)->Find(b), Expected(*m, leg, b)) << "block " << b;
  }
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 4);
}

TEST(TierPinsTest, HandOffPinsTheHostCopiesOfThePrefixWithTheirBytes) {
  std::unique_ptr<KvManager> m = Make(6, 16);
  const std::vector<int32_t> a = Tokens(8, 100);  // 4 blocks
  const std::vector<int32_t> leg = LegAfterEviction(*m, a);
  absl::StatusOr<std::shared_ptr<const HostBlocks>> host = m->PinHostBlocks(RequestId(3), leg);
  ASSERT_THAT(host, IsOk());
  ASSERT_NE(*host, nullptr);
  ASSERT_EQ((*host)->target.size(), 4u);  // the partial last block stays on the device
  for (int64_t b = 0; b < 4; ++b) {
    ASSERT_NE((*host)->Find(b), nullptr) << "block " << b;
    EXPECT_EQ(*(*host)->Find(b), Expected(*m, leg, b)) << "block " << b;
  }
  EXPECT_EQ((*host)->Find(4), nullptr);
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 4);
  EXPECT_THAT(m->PinHostBlocks(RequestId(3), leg).status(),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(m->PinHostBlocks(RequestId(44), leg).status(),
              StatusIs(absl::StatusCode::kNotFound));
  // Held by a claimed request: clean; by nobody: a violation.
  EXPECT_THAT(m->Audit({}, {RequestId(3)}, false), IsEmpty());
  EXPECT_THAT(m->Audit({RequestId(3)}, {}, false), IsEmpty());

  // The transfer read two blocks and a half; Release counts the whole ones and unpins.
  (*host)->bytes_read += static_cast<int64_t>(m->layout(kTarget).BlockBytes()) * 5 / 2;
  m->Release(RequestId(3));
  const TierStats stats = m->Stats().tiers;
  EXPECT_EQ(stats.pinned_blocks, 0);
  EXPECT_EQ(stats.served_blocks, 2);
  EXPECT_THAT(m->Audit({}, {}, false), IsEmpty());
}

TEST(TierPinsTest, PinnedEntriesSurviveHostTierPressureUntilReleased) {
  std::unique_ptr<KvManager> m = Make(10, 14);  // pins: at most 7
  const std::vector<int32_t> a = Tokens(8, 100);
  const std::vector<int32_t> leg = LegAfterEviction(*m, a);
  absl::StatusOr<std::shared_ptr<const HostBlocks>> host = m->PinHostBlocks(RequestId(3), leg);
  ASSERT_THAT(host, IsOk());
  ASSERT_NE(*host, nullptr);
  ASSERT_EQ((*host)->count(), 4);
  // Unrelated prompts push more blocks through the 14-entry host tier than it holds.
  const int64_t offloaded = m->Stats().tiers.offloaded_blocks;
  for (int i = 0; i < 8; ++i) {
    Serve(*m, RequestId(10 + i), Tokens(4, 1000 + 100 * i));
    EXPECT_THAT(m->Audit({}, {RequestId(3)}, false), IsEmpty()) << "prompt " << i;
  }
  EXPECT_THAT(m->FlushTiers(), IsOk());
  EXPECT_GE(m->Stats().tiers.offloaded_blocks - offloaded, 14);
  for (int64_t b = 0; b < 4; ++b) EXPECT_EQ(*(*host)->Find(b), Expected(*m, leg, b));
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 4);
  m->Release(RequestId(3));
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 0);
  EXPECT_THAT(m->Audit({}, {}, false), IsEmpty());
}

TEST(TierPinsTest, PinsStayWithinHalfTheHostTier) {
  std::unique_ptr<KvManager> m = Make(10, 14);  // pins: at most 7
  const std::vector<int32_t> a = Tokens(8, 100);
  const std::vector<int32_t> leg = LegAfterEviction(*m, a);
  ASSERT_THAT(m->PinHostBlocks(RequestId(3), leg), IsOk());
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 4);
  // Two more legs of the same prompt (their prefix now on the device too).
  Prefill(*m, RequestId(4), leg);
  Prefill(*m, RequestId(5), leg);
  absl::StatusOr<std::shared_ptr<const HostBlocks>> host = m->PinHostBlocks(RequestId(4), leg);
  ASSERT_THAT(host, IsOk());
  ASSERT_NE(*host, nullptr);
  std::vector<bool> pinned;
  for (int64_t b = 0; b < 4; ++b) pinned.push_back((*host)->Find(b) != nullptr);
  EXPECT_THAT(pinned, ElementsAre(true, true, true, false));
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 7);
  absl::StatusOr<std::shared_ptr<const HostBlocks>> none = m->PinHostBlocks(RequestId(5), leg);
  ASSERT_THAT(none, IsOk());
  EXPECT_EQ(*none, nullptr);  // all read from the device
  EXPECT_THAT(m->Audit({RequestId(5)}, {RequestId(3), RequestId(4)}, false), IsEmpty());
  m->Release(RequestId(3));
  m->Release(RequestId(4));
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 0);
}

TEST(TierPinsTest, NothingToPinWithoutTiersOrForAPrefixNeverEvicted) {
  std::unique_ptr<KvManager> m = Make(16, 8);
  const std::vector<int32_t> a = Tokens(8, 100);
  Prefill(*m, RequestId(1), a);  // computed here, never copied down
  absl::StatusOr<std::shared_ptr<const HostBlocks>> host = m->PinHostBlocks(RequestId(1), a);
  ASSERT_THAT(host, IsOk());
  EXPECT_EQ(*host, nullptr);
  EXPECT_EQ(m->Stats().tiers.pinned_blocks, 0);
}

TEST(TierPinsTest, TheAuditReportsPinsOfARequestNeitherLiveNorClaimed) {
  std::unique_ptr<KvManager> m = Make(6, 16);
  const std::vector<int32_t> leg = LegAfterEviction(*m, Tokens(8, 100));
  ASSERT_THAT(m->PinHostBlocks(RequestId(3), leg), IsOk());
  const std::vector<std::string> out = m->Audit({}, {}, false);
  ASSERT_FALSE(out.empty());
  EXPECT_THAT(out.back(), HasSubstr("request 3 holds 4 host tier pins"));
}

}  // namespace
}  // namespace lockstep::kv
