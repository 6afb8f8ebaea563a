// KvManager given a request's prefix keys (PrefixKeys): the same reuse and the same
// onboarded bytes as when it hashes the prompt itself, keys made for another chain or a
// stale (shorter) prompt rejected with nothing created, keys of another prompt of the
// same length only missing, and an onboard given keys (copying at once or after the
// fence) bringing back the right bytes, published, with the audit clean.
#include <cstring>
#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_events.h"
#include "kvcache/kv_manager.h"
#include "kvcache/prefix_hash.h"
#include "kvcache/testing/token_run.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr PoolKind kTarget = PoolKind::kTarget;
constexpr int kTpb = 4;
constexpr uint64_t kSalt = 31;

// `host_blocks` > 0: a host tier of that many blocks.
std::unique_ptr<KvManager> Make(int32_t blocks, int64_t host_blocks = 0) {
  KvManagerConfig config;
  config.target.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = kTpb};
  config.target.num_blocks = blocks;
  config.target.reuse_salt = kSalt;
  config.tiers.host_bytes = host_blocks * static_cast<int64_t>(config.target.layout.BlockBytes());
  absl::StatusOr<std::unique_ptr<KvManager>> m = KvManager::Create(config);
  EXPECT_THAT(m, IsOk());
  return m.ok() ? std::move(*m) : nullptr;
}

PrefixKeys KeysOf(const KvManager& m, absl::Span<const int32_t> tokens) {
  PrefixKeys keys;
  m.HashPrefix(tokens, &keys);
  return keys;
}

std::vector<BlockId> Table(const KvManager& m, RequestId id) {
  const absl::Span<const BlockId> t = m.BlockTable(id, kTarget);
  return {t.begin(), t.end()};
}

// The bytes of `id`'s target block `index`.
std::vector<std::byte> BlockBytes(const KvManager& m, RequestId id, size_t index) {
  const size_t bytes = m.layout(kTarget).BlockBytes();
  const std::byte* at = m.Storage(kTarget) + m.BlockTable(id, kTarget)[index].value() * bytes;
  return {at, at + bytes};
}

// Prefills `prompt` into a new cache of `id`, block b of it filled with bytes 16 * b +
// `tag` + its offset, commits it and releases it (its blocks stay in the tree).
void PrefillAndRelease(KvManager& m, RequestId id, const std::vector<int32_t>& prompt, int tag) {
  ASSERT_THAT(m.CreateCache(id, prompt), IsOk());
  const int64_t n = static_cast<int64_t>(prompt.size());
  ASSERT_THAT(m.Resize(id, kTarget, n, n), IsOk());
  const size_t bytes = m.layout(kTarget).BlockBytes();
  const absl::Span<const BlockId> table = m.BlockTable(id, kTarget);
  for (size_t b = 0; b < table.size(); ++b) {
    std::byte* at = m.Storage(kTarget) + table[b].value() * bytes;
    for (size_t i = 0; i < bytes; ++i) at[i] = static_cast<std::byte>(16 * b + tag + i);
  }
  ASSERT_THAT(m.Commit(id, prompt), IsOk());
  m.Release(id);
}

// Another cache takes every block of the pool: the tree's blocks leave the device.
void EvictAll(KvManager& m) {
  const RequestId other(99);
  ASSERT_THAT(m.CreateCache(other), IsOk());
  ASSERT_THAT(m.Resize(other, kTarget, int64_t{m.num_blocks(kTarget)} * kTpb, 0), IsOk());
  m.Release(other);
  EXPECT_THAT(m.FlushTiers(), IsOk());
}

// The keys the tree's blocks were committed under (KvEventObserver).
struct CommittedKeys : KvEventObserver {
  void OnCommitted(uint64_t key) override { keys.push_back(key); }
  void OnEvicted(uint64_t) override {}
  std::vector<uint64_t> keys;
};

// A commit given the request's keys (a prefill chunk, the whole context, then decoded
// tokens after the keys were extended) publishes each block under the key a fresh hash
// of the tokens gives, and the tree then matches a freshly hashed prompt.
TEST(KvManagerKeysTest, ACommitGivenKeysPublishesWhatAFreshHashNames) {
  std::unique_ptr<KvManager> m = Make(32);
  CommittedKeys committed;
  m->SetEventObserver(&committed);
  const RequestId id(1);
  const std::vector<int32_t> prompt = Tokens(18, 100);
  PrefixKeys keys = KeysOf(*m, prompt);
  ASSERT_THAT(m->CreateCache(id, prompt, keys), IsOk());
  ASSERT_THAT(m->Resize(id, kTarget, 18, 8), IsOk());
  ASSERT_THAT(m->Commit(id, absl::MakeConstSpan(prompt).first(8), keys), IsOk());
  EXPECT_THAT(committed.keys,
              ElementsAreArray(PrefixHashChain(kSalt, kTpb, absl::MakeConstSpan(prompt).first(8))));
  ASSERT_THAT(m->Resize(id, kTarget, 18, 18), IsOk());
  ASSERT_THAT(m->Commit(id, prompt, keys), IsOk());
  EXPECT_THAT(committed.keys, ElementsAreArray(PrefixHashChain(kSalt, kTpb, prompt)));
  // Decoded tokens: the keys are extended over them (only the new blocks hashed).
  std::vector<int32_t> decoded = prompt;
  for (int32_t t : Tokens(7, 500)) decoded.push_back(t);
  ASSERT_THAT(m->Resize(id, kTarget, 25, 25), IsOk());
  EXPECT_THAT(m->Commit(id, decoded, keys),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stale keys")));
  EXPECT_EQ(m->Info(id, kTarget)->committed, 16) << "a refused commit publishes nothing";
  m->HashPrefix(absl::MakeConstSpan(decoded).first(24), &keys);
  ASSERT_THAT(m->Commit(id, absl::MakeConstSpan(decoded).first(24), keys), IsOk());
  EXPECT_THAT(committed.keys, ElementsAreArray(PrefixHashChain(
                                  kSalt, kTpb, absl::MakeConstSpan(decoded).first(24))));
  EXPECT_EQ(m->ProbePrefix(decoded), 24) << "the tree matches the freshly hashed tokens";
  EXPECT_THAT(m->Audit({id}, {}, false), IsEmpty());
  m->SetEventObserver(nullptr);
}

// Keys made under another salt or block size are refused: nothing is committed.
TEST(KvManagerKeysTest, ACommitGivenForeignKeysCommitsNothing) {
  std::unique_ptr<KvManager> m = Make(32);
  const RequestId id(1);
  const std::vector<int32_t> prompt = Tokens(16, 100);
  ASSERT_THAT(m->CreateCache(id, prompt), IsOk());
  ASSERT_THAT(m->Resize(id, kTarget, 16, 16), IsOk());
  PrefixKeys foreign;
  foreign.Extend(kSalt + 1, kTpb, prompt);
  EXPECT_THAT(m->Commit(id, prompt, foreign),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("salt")));
  EXPECT_EQ(m->Info(id, kTarget)->committed, 0);
  EXPECT_EQ(m->ProbePrefix(prompt), 0);
}

TEST(KvManagerKeysTest, KeysReuseWhatHashingTheDeviceTreeWouldReuse) {
  std::unique_ptr<KvManager> m = Make(32);
  const std::vector<int32_t> prompt = Tokens(18, 100);
  PrefillAndRelease(*m, RequestId(1), prompt, 0);
  const PrefixKeys keys = KeysOf(*m, prompt);
  EXPECT_EQ(*m->ProbePrefix(prompt, keys), m->ProbePrefix(prompt));
  EXPECT_EQ(*m->ProbePrefix(prompt, keys), 16);
  ASSERT_THAT(m->CreateCache(RequestId(2), prompt), IsOk());
  const absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(3), prompt, keys);
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(*reused, 16);
  EXPECT_THAT(Table(*m, RequestId(3)), ElementsAreArray(Table(*m, RequestId(2))));
  EXPECT_THAT(m->Audit({RequestId(2), RequestId(3)}, {}, false), IsEmpty());
}

TEST(KvManagerKeysTest, StaleOrForeignKeysAreRejectedAndNothingIsCreated) {
  std::unique_ptr<KvManager> m = Make(32);
  const std::vector<int32_t> prompt = Tokens(18, 100);
  PrefillAndRelease(*m, RequestId(1), prompt, 0);
  // Keys of the prompt before it grew (a request's context after a pause, its keys not
  // extended): the prompt's length says they are stale.
  const PrefixKeys stale = KeysOf(*m, absl::MakeConstSpan(prompt).first(13));
  EXPECT_THAT(m->CreateCache(RequestId(2), prompt, stale),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stale")));
  EXPECT_FALSE(m->Has(RequestId(2), kTarget));
  EXPECT_THAT(m->ProbePrefix(prompt, stale), StatusIs(absl::StatusCode::kInvalidArgument));
  // Keys of another salt or block size name another chain.
  PrefixKeys foreign;
  foreign.Extend(kSalt + 1, kTpb, prompt);
  EXPECT_THAT(m->CreateCache(RequestId(2), prompt, foreign),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("salt")));
  foreign.Extend(kSalt, kTpb + 1, prompt);
  EXPECT_THAT(m->CreateCache(RequestId(2), prompt, foreign),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(m->Has(RequestId(2), kTarget));
  EXPECT_EQ(m->Stats().reused_tokens, 0);
  EXPECT_THAT(m->Audit({}, {}, false), IsEmpty());
}

TEST(KvManagerKeysTest, KeysOfAnotherPromptOfTheSameLengthOnlyMiss) {
  std::unique_ptr<KvManager> m = Make(8, /*host_blocks=*/16);
  const std::vector<int32_t> prompt = Tokens(18, 100);
  const std::vector<int32_t> other = Tokens(18, 900);
  PrefillAndRelease(*m, RequestId(1), prompt, 0);
  PrefillAndRelease(*m, RequestId(2), other, 64);
  // Both prompts' blocks are in the device tree or the host tier; the other's keys pass
  // the length check but name blocks holding other tokens: nothing is reused or
  // onboarded for `prompt`, in the device tree or below it.
  const PrefixKeys wrong = KeysOf(*m, other);
  EXPECT_EQ(*m->ProbePrefix(prompt, wrong), 0);
  const absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(3), prompt, wrong);
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(*reused, 0);
  m->Release(RequestId(3));
  EvictAll(*m);
  const absl::StatusOr<int64_t> below = m->CreateCache(RequestId(4), prompt, wrong);
  ASSERT_THAT(below, IsOk());
  EXPECT_EQ(*below, 0);
  EXPECT_EQ(m->Stats().onboarded_tokens, 0);
  EXPECT_THAT(m->Audit({RequestId(4)}, {}, false), IsEmpty());
}

// Onboards `prompt` (its blocks only in the host tier) into `id`, with the request's
// keys, copying at once or (`in_flight`) after a batch launched before it; checks the
// bytes are the prefilled ones and the blocks are published.
void OnboardWithKeys(bool in_flight) {
  std::unique_ptr<KvManager> m = Make(8, /*host_blocks=*/16);
  const std::vector<int32_t> prompt = Tokens(19, 100);
  PrefillAndRelease(*m, RequestId(1), prompt, 0);
  EvictAll(*m);
  if (in_flight) m->OnBatchLaunched();
  const absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(2), prompt, KeysOf(*m, prompt));
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(*reused, 16);  // four whole blocks before the last token
  EXPECT_EQ(m->OnboardPending(RequestId(2)), in_flight);
  EXPECT_THAT(m->Audit({RequestId(2)}, {}, false), IsEmpty());
  if (in_flight) m->OnBatchCollected();
  EXPECT_FALSE(m->OnboardPending(RequestId(2)));
  EXPECT_EQ(m->Info(RequestId(2), kTarget)->committed, 16);
  const size_t bytes = m->layout(kTarget).BlockBytes();
  for (size_t b = 0; b < 4; ++b) {
    const std::vector<std::byte> got = BlockBytes(*m, RequestId(2), b);
    for (size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(got[i], static_cast<std::byte>(16 * b + i)) << "block " << b << " byte " << i;
    }
  }
  // Published: the next request reuses them from the device, copy-free.
  const absl::StatusOr<int64_t> shared = m->CreateCache(RequestId(3), prompt, KeysOf(*m, prompt));
  ASSERT_THAT(shared, IsOk());
  EXPECT_EQ(*shared, 16);
  EXPECT_THAT(Table(*m, RequestId(3)), ElementsAreArray(Table(*m, RequestId(2))));
  EXPECT_EQ(m->Stats().onboarded_tokens, 16);
  EXPECT_THAT(m->Audit({RequestId(2), RequestId(3)}, {}, false), IsEmpty());
  m->Release(RequestId(2));
  m->Release(RequestId(3));
  EXPECT_THAT(m->Audit({}, {}, false), IsEmpty());
}

TEST(KvManagerKeysTest, AnOnboardCopyingAtOnceBringsBackAndPublishesItsBlocks) { OnboardWithKeys(false); }

TEST(KvManagerKeysTest, AnOnboardAfterTheFencePublishesAfterItsCopy) { OnboardWithKeys(true); }

}  // namespace
}  // namespace lockstep::kv
