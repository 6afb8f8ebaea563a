// Prefix reuse with draft pools: a paired draft reuses with its target, an unpaired
// mirror from its own radix tree (never past its target), and concurrent requests with
// the same prefix: the first to commit publishes it for every later request.
#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"
#include "kvcache/testing/token_run.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

constexpr PoolKind kTarget = PoolKind::kTarget;
constexpr PoolKind kDraft = PoolKind::kDraft;

PoolConfig Pool(int32_t blocks, int tpb) {
  PoolConfig pool;
  pool.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = tpb};
  pool.num_blocks = blocks;
  return pool;
}

std::unique_ptr<KvManager> Make(DraftMode mode, int32_t target_blocks, int target_tpb,
                                int32_t draft_blocks, int draft_tpb) {
  KvManagerConfig config;
  config.target = Pool(target_blocks, target_tpb);
  config.draft_mode = mode;
  config.draft = Pool(draft_blocks, draft_tpb);
  absl::StatusOr<std::unique_ptr<KvManager>> m = KvManager::Create(config);
  EXPECT_THAT(m, IsOk());
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<BlockId> Table(const KvManager& m, RequestId id, PoolKind pool, size_t n) {
  const absl::Span<const BlockId> t = m.BlockTable(id, pool);
  return {t.begin(), t.begin() + static_cast<ptrdiff_t>(std::min(n, t.size()))};
}

// What the scheduler does for a new context request: the target cache (reusing), the
// mirror when unpaired (reusing its own prefix), growth to the whole prompt, and, once
// the prefill is computed, the commit.
void Prefill(KvManager& m, RequestId id, const std::vector<int32_t>& prompt) {
  ASSERT_THAT(m.CreateCache(id, prompt), IsOk());
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (m.config().draft_mode == DraftMode::kUnpaired) {
    ASSERT_THAT(m.AdmitMirror(id, prompt), IsOk());
    ASSERT_THAT(m.Resize(id, kDraft, n, n), IsOk());
  }
  ASSERT_THAT(m.Resize(id, kTarget, n, n), IsOk());
  ASSERT_THAT(m.Commit(id, prompt), IsOk());
}

TEST(KvManagerReuseTest, UnpairedMirrorReusesItsOwnCommittedPrefix) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 32, 4, 32, 6);
  const std::vector<int32_t> prompt = Tokens(30, 0);
  Prefill(*m, RequestId(1), prompt);
  EXPECT_EQ(m->Info(RequestId(1), kTarget)->committed, 28);
  EXPECT_EQ(m->Info(RequestId(1), kDraft)->committed, 30);  // the mirror published too
  EXPECT_EQ(m->Stats().mirror_reused_tokens, 0);

  // Target: 29 tokens of the prompt may be reused, 28 on its blocks. The mirror: at most
  // the target's history (28), on its own blocks of 6: 24.
  ASSERT_THAT(m->CreateCache(RequestId(2), prompt), IsOk());
  EXPECT_EQ(m->Info(RequestId(2), kTarget)->history, 28);
  ASSERT_THAT(m->AdmitMirror(RequestId(2), prompt), IsOk());
  const CacheInfo mirror = *m->Info(RequestId(2), kDraft);
  EXPECT_EQ(mirror.committed, 24);
  EXPECT_EQ(mirror.history, 24);
  EXPECT_EQ(mirror.capacity, 24);
  EXPECT_THAT(Table(*m, RequestId(2), kDraft, 4),
              ElementsAreArray(Table(*m, RequestId(1), kDraft, 4)));
  EXPECT_EQ(m->Stats().mirror_reused_tokens, 24);
  EXPECT_EQ(m->Stats().reused_tokens, 28);
  // The draft computes [24, 28) and on into blocks of its own.
  ASSERT_THAT(m->Resize(RequestId(2), kDraft, 30, 30), IsOk());
  EXPECT_NE(m->BlockTable(RequestId(2), kDraft)[4], m->BlockTable(RequestId(1), kDraft)[4]);
  EXPECT_THAT(m->Audit({RequestId(1), RequestId(2)}, {}, false), IsEmpty());
}

TEST(KvManagerReuseTest, MirrorNeverReusesPastItsTarget) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 8, 4, 16, 4);
  const std::vector<int32_t> prompt = Tokens(20, 0);
  Prefill(*m, RequestId(1), prompt);
  m->Release(RequestId(1));
  EXPECT_EQ(m->Stats().target.cached_blocks, 5);
  EXPECT_EQ(m->Stats().draft->cached_blocks, 5);
  // Another request fills the target pool: the target's prefix is evicted, the draft's
  // stays.
  ASSERT_THAT(m->CreateCache(RequestId(3)), IsOk());
  ASSERT_THAT(m->Resize(RequestId(3), kTarget, 32, 0), IsOk());
  m->Release(RequestId(3));
  EXPECT_EQ(m->ProbePrefix(prompt), 0);
  EXPECT_EQ(m->Stats().draft->cached_blocks, 5);
  ASSERT_THAT(m->CreateCache(RequestId(2), prompt), IsOk());
  ASSERT_THAT(m->AdmitMirror(RequestId(2), prompt), IsOk());
  EXPECT_EQ(m->Info(RequestId(2), kDraft)->history, 0);  // the target starts at 0
  EXPECT_EQ(m->Stats().mirror_reused_tokens, 0);
  EXPECT_THAT(m->Audit({RequestId(2)}, {}, false), IsEmpty());
}

TEST(KvManagerReuseTest, MirrorReusesLessWhenItsOwnTreeLostThePrefix) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 16, 4, 8, 4);
  const std::vector<int32_t> prompt = Tokens(20, 0);
  Prefill(*m, RequestId(1), prompt);
  m->Release(RequestId(1));
  // A mirror fills the draft pool: the draft prefix is evicted, the target's stays.
  ASSERT_THAT(m->CreateCache(RequestId(3)), IsOk());
  ASSERT_THAT(m->AdmitMirror(RequestId(3)), IsOk());
  ASSERT_THAT(m->Resize(RequestId(3), kDraft, 32, 0), IsOk());
  m->Release(RequestId(3));
  ASSERT_THAT(m->CreateCache(RequestId(2), prompt), IsOk());
  EXPECT_EQ(m->Info(RequestId(2), kTarget)->history, 16);
  ASSERT_THAT(m->AdmitMirror(RequestId(2), prompt), IsOk());
  EXPECT_EQ(m->Info(RequestId(2), kDraft)->history, 0);  // recomputes [0, 16) itself
  EXPECT_THAT(m->Audit({RequestId(2)}, {}, false), IsEmpty());
}

TEST(KvManagerReuseTest, MirrorsOfTheDummyAndResumedMirrorsReuseNothing) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 16, 4, 16, 4);
  const std::vector<int32_t> prompt = Tokens(20, 0);
  Prefill(*m, RequestId(1), prompt);
  ASSERT_THAT(m->CreateCache(m->dummy_id(), prompt), IsOk());
  ASSERT_THAT(m->Resize(m->dummy_id(), kTarget, 16, 16), IsOk());
  ASSERT_THAT(m->AdmitMirror(m->dummy_id(), prompt), IsOk());
  EXPECT_EQ(m->Info(m->dummy_id(), kDraft)->history, 0);
  // No prompt: nothing to match.
  ASSERT_THAT(m->CreateCache(RequestId(2), prompt), IsOk());
  ASSERT_THAT(m->AdmitMirror(RequestId(2)), IsOk());
  EXPECT_EQ(m->Info(RequestId(2), kDraft)->history, 0);
  // An existing mirror is resumed as it is.
  ASSERT_THAT(m->AdmitMirror(RequestId(2), prompt), IsOk());
  EXPECT_EQ(m->Info(RequestId(2), kDraft)->history, 0);
  EXPECT_EQ(m->Stats().mirror_reused_tokens, 0);
  EXPECT_THAT(m->Audit({RequestId(1), RequestId(2)}, {}, true), IsEmpty());
}

// Two requests with the same prompt prefill at once: neither finds anything. The first
// to commit publishes the prefix; the other's blocks stay private (freed with it). A
// request created afterwards reuses the published blocks in every pool.
TEST(KvManagerReuseTest, ConcurrentIdenticalPrefixesAreOfferedOnceTheFirstCommits) {
  for (const DraftMode mode : {DraftMode::kNone, DraftMode::kPaired, DraftMode::kUnpaired}) {
    SCOPED_TRACE(DraftModeName(mode));
    std::unique_ptr<KvManager> m = Make(mode, 32, 4, 32, 4);
    const std::vector<int32_t> prompt = Tokens(17, 100);
    const RequestId a(1), b(2), c(3);
    for (const RequestId id : {a, b}) {
      ASSERT_THAT(m->CreateCache(id, prompt), IsOk());
      if (mode == DraftMode::kUnpaired) {
        ASSERT_THAT(m->AdmitMirror(id, prompt), IsOk());
        ASSERT_THAT(m->Resize(id, kDraft, 17, 17), IsOk());
      }
      ASSERT_THAT(m->Resize(id, kTarget, 17, 17), IsOk());
    }
    EXPECT_EQ(m->Stats().reused_tokens, 0);
    ASSERT_THAT(m->Commit(a, prompt), IsOk());
    ASSERT_THAT(m->Commit(b, prompt), IsOk());
    EXPECT_EQ(m->Info(b, kTarget)->committed, 16);  // committed, not published
    EXPECT_EQ(m->ProbePrefix(prompt), 16);
    ASSERT_THAT(m->CreateCache(c, prompt), IsOk());
    EXPECT_THAT(Table(*m, c, kTarget, 4), ElementsAreArray(Table(*m, a, kTarget, 4)));
    if (mode == DraftMode::kUnpaired) ASSERT_THAT(m->AdmitMirror(c, prompt), IsOk());
    if (mode != DraftMode::kNone) {
      EXPECT_EQ(m->Info(c, kDraft)->history, 16);
      EXPECT_THAT(Table(*m, c, kDraft, 4), ElementsAreArray(Table(*m, a, kDraft, 4)));
    }
    EXPECT_THAT(m->Audit({a, b, c}, {}, false), IsEmpty());
    m->Release(a);
    m->Release(b);
    EXPECT_THAT(m->Audit({c}, {}, false), IsEmpty());
    m->Release(c);
    // Only the first request's published blocks stay, as reusable prefix.
    EXPECT_EQ(m->Stats().target.cached_blocks, 4);
    EXPECT_EQ(m->Stats().target.used_blocks, 0);
    if (mode != DraftMode::kNone) {
      EXPECT_EQ(m->Stats().draft->cached_blocks, 4);
      EXPECT_EQ(m->Stats().draft->used_blocks, 0);
    }
    EXPECT_THAT(m->Audit({}, {}, false), IsEmpty());
  }
}

}  // namespace
}  // namespace lockstep::kv
