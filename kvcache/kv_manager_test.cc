#include "kvcache/kv_manager.h"

#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/testing/token_run.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr PoolKind kTarget = PoolKind::kTarget;
constexpr PoolKind kDraft = PoolKind::kDraft;

PoolConfig Pool(int32_t blocks, int tpb = 4) {
  PoolConfig pool;
  pool.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = tpb};
  pool.num_blocks = blocks;
  return pool;
}

std::unique_ptr<KvManager> Make(KvManagerConfig config) {
  absl::StatusOr<std::unique_ptr<KvManager>> m = KvManager::Create(config);
  EXPECT_THAT(m, IsOk());
  return m.ok() ? std::move(*m) : nullptr;
}

std::unique_ptr<KvManager> Make(DraftMode mode, int32_t target_blocks, int32_t draft_blocks,
                                int32_t dummy_reserved_tokens = 0) {
  KvManagerConfig config;
  config.target = Pool(target_blocks);
  config.draft_mode = mode;
  config.draft = Pool(draft_blocks);
  config.dummy_reserved_tokens = dummy_reserved_tokens;
  return Make(config);
}

std::vector<BlockId> Table(const KvManager& m, RequestId id, PoolKind pool) {
  const absl::Span<const BlockId> t = m.BlockTable(id, pool);
  return {t.begin(), t.end()};
}

TEST(KvManagerTest, CreateValidatesConfig) {
  KvManagerConfig config;
  config.target = Pool(0);
  EXPECT_THAT(KvManager::Create(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target pool: num_blocks")));
  std::unique_ptr<KvManager> m = Make(DraftMode::kNone, 4, 0);
  EXPECT_FALSE(m->has_draft());
  EXPECT_LT(m->dummy_id().value(), 0);
  EXPECT_NE(m->Storage(kTarget), nullptr);
  EXPECT_EQ(m->Storage(kDraft), nullptr);
  EXPECT_EQ(m->memory_kind(), MemoryKind::kHost);
  ASSERT_NE(m->Copier(kTarget), nullptr);
  EXPECT_EQ(m->Copier(kTarget)->num_blocks(), 4);
  EXPECT_EQ(m->Copier(kDraft), nullptr);
  EXPECT_EQ(m->num_blocks(kTarget), 4);
  EXPECT_EQ(m->num_blocks(kDraft), 0);
  EXPECT_EQ(m->tokens_per_block(kTarget), 4);
}

TEST(KvManagerTest, UsesTheGivenAllocator) {
  // Host memory that calls itself device memory and counts its bytes.
  struct Counting : BlockAllocator {
    absl::StatusOr<std::byte*> Allocate(size_t n) override {
      bytes += n;
      return host.Allocate(n);
    }
    void Free(std::byte* p, size_t n) override {
      bytes -= n;
      host.Free(p, n);
    }
    MemoryKind memory_kind() const override { return MemoryKind::kDevice; }
    absl::StatusOr<std::unique_ptr<BlockCopier>> MakeCopier(std::byte* base,
                                                            const BlockLayout& layout,
                                                            int32_t num_blocks) override {
      return host.MakeCopier(base, layout, num_blocks);
    }
    HostAllocator host;
    size_t bytes = 0;
  } counting;
  KvManagerConfig config;
  config.target = Pool(8);
  config.draft_mode = DraftMode::kUnpaired;
  config.draft = Pool(4);
  {
    absl::StatusOr<std::unique_ptr<KvManager>> m = KvManager::Create(config, &counting);
    ASSERT_THAT(m, IsOk());
    EXPECT_EQ(counting.bytes, (8 + 4) * config.target.layout.BlockBytes());
    EXPECT_EQ((*m)->memory_kind(), MemoryKind::kDevice);
    EXPECT_NE((*m)->Copier(kTarget), nullptr);
    EXPECT_NE((*m)->Copier(kDraft), nullptr);
  }
  EXPECT_EQ(counting.bytes, 0u);
}

TEST(KvManagerTest, ResizeRulesAndExactMessages) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kNone, 4, 0);
  const RequestId id(1);
  ASSERT_THAT(m->CreateCache(id), IsOk());
  EXPECT_THAT(m->CreateCache(id), StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_THAT(m->Resize(id, kTarget, 8, 5), IsOk());
  EXPECT_THAT(m->Resize(id, kTarget, std::nullopt, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot decrease")));
  EXPECT_THAT(
      m->Resize(id, kTarget, std::nullopt, 9),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot exceed capacity")));
  EXPECT_THAT(
      m->Resize(id, kTarget, 4, std::nullopt),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot exceed capacity")));
  EXPECT_THAT(m->Resize(RequestId(2), kTarget, 4, 0), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(m->Resize(id, kDraft, 4, 0), StatusIs(absl::StatusCode::kNotFound));

  // Growth past the pool: ResourceExhausted and nothing changed.
  const std::vector<BlockId> before = Table(*m, id, kTarget);
  const ManagerStats stats_before = m->Stats();
  EXPECT_THAT(m->Resize(id, kTarget, 17, 6), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Table(*m, id, kTarget), ElementsAreArray(before));
  EXPECT_EQ(m->Info(id, kTarget)->capacity, 8);
  EXPECT_EQ(m->Info(id, kTarget)->history, 5);
  EXPECT_EQ(m->Stats().target.free_blocks, stats_before.target.free_blocks);

  // Shrink frees tail blocks; a suspended cache cannot be resized.
  ASSERT_THAT(m->Resize(id, kTarget, 5, std::nullopt), IsOk());
  EXPECT_EQ(m->Stats().target.free_blocks, 2);
  ASSERT_THAT(m->Suspend(id), IsOk());
  EXPECT_THAT(m->Resize(id, kTarget, 8, std::nullopt),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("suspended")));
  ASSERT_THAT(m->Resume(id), IsOk());
  EXPECT_THAT(m->Resize(id, kTarget, 8, std::nullopt), IsOk());
  EXPECT_THAT(m->Suspend(RequestId(5)), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(m->Audit({id}, {}, false), IsEmpty());
}

// Bad input is an error, never a crash or an overflow.
TEST(KvManagerTest, AbsurdArgumentsAreErrors) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kNone, 4, 0);
  const RequestId id(1);
  ASSERT_THAT(m->CreateCache(id), IsOk());
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(m->Resize(id, kTarget, kHuge, std::nullopt),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(
      m->Resize(id, kTarget, -5, std::nullopt),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot exceed capacity")));
  EXPECT_FALSE(m->CanGrow(id, kHuge));
  EXPECT_FALSE(m->CanGrow(RequestId(2), kHuge));
  const auto bogus = static_cast<PoolKind>(7);
  EXPECT_THAT(m->Resize(id, bogus, 4, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(m->Has(id, bogus));
  EXPECT_EQ(*m->ApplyUpdate({.id = id, .pool = bogus, .generation = 1, .history = 0}),
            UpdateResult::kStale);
  EXPECT_EQ(m->Info(id, kTarget)->capacity, 0);
  EXPECT_THAT(m->Audit({id}, {}, false), IsEmpty());
}

TEST(KvManagerTest, PairedGrowthIsAtomic) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kPaired, 8, 3);
  const RequestId id(1);
  ASSERT_THAT(m->CreateCache(id), IsOk());
  ASSERT_TRUE(m->Has(id, kDraft));
  ASSERT_THAT(m->Resize(id, kTarget, 8, 3), IsOk());
  EXPECT_EQ(m->Info(id, kDraft)->capacity, 8);
  EXPECT_EQ(m->Info(id, kDraft)->history, 3);
  EXPECT_THAT(Table(*m, id, kDraft), SizeIs(2));

  // 4 blocks fit the target but not the 3-block draft pool: the target is untouched.
  const std::vector<BlockId> target_before = Table(*m, id, kTarget);
  EXPECT_FALSE(m->CanGrow(id, 8));
  EXPECT_THAT(m->Resize(id, kTarget, 16, std::nullopt),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("draft pool")));
  EXPECT_THAT(Table(*m, id, kTarget), ElementsAreArray(target_before));
  EXPECT_EQ(m->Info(id, kTarget)->capacity, 8);
  EXPECT_EQ(m->Stats().target.free_blocks, 6);

  // The draft alone cannot be resized; shrink goes to both.
  EXPECT_THAT(m->Resize(id, kDraft, 4, std::nullopt),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(m->Resize(id, kTarget, 4, std::nullopt), IsOk());
  EXPECT_THAT(Table(*m, id, kDraft), SizeIs(1));
  EXPECT_EQ(m->Stats().draft->free_blocks, 2);
  EXPECT_EQ(m->Release(id), 2);
  EXPECT_THAT(m->Audit({}, {}, false), IsEmpty());
}

TEST(KvManagerTest, UnpairedMirrorLifecycle) {
  EXPECT_THAT(Make(DraftMode::kNone, 4, 0)->AdmitMirror(RequestId(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Make(DraftMode::kPaired, 4, 4)->AdmitMirror(RequestId(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 8, 4);
  const RequestId id(1);
  EXPECT_THAT(m->AdmitMirror(id), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_THAT(m->CreateCache(id), IsOk());
  EXPECT_FALSE(m->Has(id, kDraft));  // unpaired: no mirror until admitted
  ASSERT_THAT(m->AdmitMirror(id), IsOk());
  const CacheInfo mirror = *m->Info(id, kDraft);
  EXPECT_EQ(mirror.capacity, 0);
  EXPECT_EQ(mirror.status, CacheStatus::kActive);
  EXPECT_NE(mirror.generation, m->Info(id, kTarget)->generation);

  // Sized on its own.
  ASSERT_THAT(m->Resize(id, kTarget, 8, 4), IsOk());
  ASSERT_THAT(m->Resize(id, kDraft, 7, 7), IsOk());
  EXPECT_EQ(m->Info(id, kTarget)->capacity, 8);
  EXPECT_EQ(m->Info(id, kDraft)->capacity, 7);

  // Suspend covers both; admission resumes the mirror (same cache, same generation).
  ASSERT_THAT(m->Suspend(id), IsOk());
  EXPECT_EQ(m->Info(id, kDraft)->status, CacheStatus::kSuspended);
  ASSERT_THAT(m->AdmitMirror(id), IsOk());
  EXPECT_EQ(m->Info(id, kDraft)->status, CacheStatus::kActive);
  EXPECT_EQ(m->Info(id, kDraft)->generation, mirror.generation);
  EXPECT_EQ(m->Info(id, kDraft)->capacity, 7);
  ASSERT_THAT(m->Resume(id), IsOk());
  EXPECT_THAT(m->Audit({id}, {}, false), IsEmpty());

  // One release frees both pools; a second is a no-op.
  EXPECT_EQ(m->Release(id), 2);
  EXPECT_EQ(m->Release(id), 0);
  EXPECT_FALSE(m->Has(id, kTarget));
  EXPECT_FALSE(m->Has(id, kDraft));
  EXPECT_EQ(m->Stats().draft->free_blocks, 4);
  EXPECT_THAT(m->Audit({}, {}, false), IsEmpty());
}

// docs/design.md §1 at this level. Step N: dummy D1 forwarded; its completion update
// (history 3, capacity kept) is deferred. Step N+1: D2 (same id) is created, grown,
// and its unpaired mirror admitted at capacity 0; the veto rolls D2 back through
// Release. The deferred update for D1 then finds nothing of its own: stale, no error.
TEST(KvManagerTest, MotivatingLeakUnpairedMirrorDeferredUpdateIsStale) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 16, 16, /*dummy_reserved_tokens=*/8);
  const RequestId dummy = m->dummy_id();

  // Step N: D1 with K = 3 drafts: target and mirror cover 1 + 3 tokens.
  ASSERT_THAT(m->CreateCache(dummy), IsOk());
  ASSERT_THAT(m->AdmitMirror(dummy), IsOk());
  ASSERT_THAT(m->Resize(dummy, kTarget, 4, 0), IsOk());
  ASSERT_THAT(m->Resize(dummy, kDraft, 4, 0), IsOk());
  const CacheUpdate deferred_draft{.id = dummy,
                                   .pool = kDraft,
                                   .generation = m->Info(dummy, kDraft)->generation,
                                   .capacity = std::nullopt,
                                   .history = 3};
  const CacheUpdate deferred_target{.id = dummy,
                                    .pool = kTarget,
                                    .generation = m->Info(dummy, kTarget)->generation,
                                    .capacity = std::nullopt,
                                    .history = 3};
  EXPECT_EQ(m->Release(dummy), 2);  // D1 terminated

  // Step N+1: D2 is padded in and scheduled; the mirror is admitted at capacity 0.
  ASSERT_THAT(m->CreateCache(dummy), IsOk());
  ASSERT_THAT(m->Resize(dummy, kTarget, 4, 0), IsOk());
  ASSERT_THAT(m->AdmitMirror(dummy), IsOk());
  ASSERT_EQ(m->Info(dummy, kDraft)->capacity, 0);
  // Even while D2's mirror exists, D1's update never lands on it.
  absl::StatusOr<UpdateResult> early = m->ApplyUpdate(deferred_draft);
  ASSERT_THAT(early, IsOk());
  EXPECT_EQ(*early, UpdateResult::kStale);
  EXPECT_EQ(m->Info(dummy, kDraft)->history, 0);
  // The veto: one release path rolls D2 back in every pool, mirror included.
  EXPECT_EQ(m->Release(dummy), 2);
  EXPECT_FALSE(m->Has(dummy, kDraft));
  EXPECT_THAT(m->Ids(kDraft), IsEmpty());

  // Step N+2: the deferred completion update of D1 is processed.
  absl::StatusOr<UpdateResult> draft = m->ApplyUpdate(deferred_draft);
  absl::StatusOr<UpdateResult> target = m->ApplyUpdate(deferred_target);
  ASSERT_THAT(draft, IsOk());
  ASSERT_THAT(target, IsOk());
  EXPECT_EQ(*draft, UpdateResult::kStale);
  EXPECT_EQ(*target, UpdateResult::kStale);
  EXPECT_EQ(m->Stats().stale_updates, 3);
  EXPECT_FALSE(m->Has(dummy, kDraft));
  EXPECT_THAT(m->Audit({}, {}, /*dummy_active=*/false), IsEmpty());

  // Re-creating the dummy (new generations) does not revive the old update.
  ASSERT_THAT(m->CreateCache(dummy), IsOk());
  ASSERT_THAT(m->AdmitMirror(dummy), IsOk());
  EXPECT_NE(m->Info(dummy, kDraft)->generation, deferred_draft.generation);
  EXPECT_EQ(*m->ApplyUpdate(deferred_draft), UpdateResult::kStale);
  EXPECT_EQ(*m->ApplyUpdate(deferred_target), UpdateResult::kStale);
  EXPECT_EQ(m->Info(dummy, kDraft)->history, 0);
  EXPECT_EQ(m->Stats().stale_updates, 5);
  EXPECT_THAT(m->Audit({}, {}, /*dummy_active=*/true), IsEmpty());
}

TEST(KvManagerTest, MotivatingLeakPairedPoolDeferredUpdateIsStale) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kPaired, 16, 16, /*dummy_reserved_tokens=*/8);
  const RequestId dummy = m->dummy_id();
  ASSERT_THAT(m->CreateCache(dummy), IsOk());
  ASSERT_THAT(m->Resize(dummy, kTarget, 4, 0), IsOk());
  const CacheUpdate deferred{.id = dummy,
                             .pool = kTarget,
                             .generation = m->Info(dummy, kTarget)->generation,
                             .capacity = std::nullopt,
                             .history = 3};
  const CacheUpdate deferred_draft{.id = dummy,
                                   .pool = kDraft,
                                   .generation = m->Info(dummy, kDraft)->generation,
                                   .capacity = std::nullopt,
                                   .history = 3};
  EXPECT_EQ(m->Release(dummy), 2);
  ASSERT_THAT(m->CreateCache(dummy), IsOk());  // D2: target and paired draft at 0
  EXPECT_EQ(m->Release(dummy), 2);             // vetoed
  EXPECT_EQ(*m->ApplyUpdate(deferred), UpdateResult::kStale);
  EXPECT_EQ(*m->ApplyUpdate(deferred_draft), UpdateResult::kStale);
  EXPECT_THAT(m->Ids(kTarget), IsEmpty());
  EXPECT_THAT(m->Ids(kDraft), IsEmpty());
  EXPECT_THAT(m->Audit({}, {}, false), IsEmpty());
  ASSERT_THAT(m->CreateCache(dummy), IsOk());
  EXPECT_EQ(*m->ApplyUpdate(deferred), UpdateResult::kStale);
  EXPECT_EQ(m->Info(dummy, kTarget)->history, 0);
  EXPECT_EQ(m->Info(dummy, kDraft)->history, 0);
  EXPECT_EQ(m->Stats().stale_updates, 3);
  EXPECT_THAT(m->Audit({}, {}, true), IsEmpty());
}

TEST(KvManagerTest, FreshUpdatesApplyAndBadLengthsAreErrors) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kPaired, 8, 8);
  const RequestId id(4);
  ASSERT_THAT(m->CreateCache(id), IsOk());
  ASSERT_THAT(m->Resize(id, kTarget, 8, 0), IsOk());
  const uint64_t gen = m->Info(id, kTarget)->generation;
  EXPECT_EQ(*m->ApplyUpdate({.id = id, .generation = gen, .capacity = 6, .history = 5}),
            UpdateResult::kApplied);
  EXPECT_EQ(m->Info(id, kTarget)->history, 5);
  EXPECT_EQ(m->Info(id, kDraft)->capacity, 6);  // paired: both
  EXPECT_THAT(
      m->ApplyUpdate({.id = id, .generation = gen, .history = 9}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot exceed capacity")));
  // A live paired draft generation is resized through its target only.
  EXPECT_THAT(
      m->ApplyUpdate(
          {.id = id, .pool = kDraft, .generation = m->Info(id, kDraft)->generation, .history = 6}),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  // A suspended cache is not live for updates.
  ASSERT_THAT(m->Suspend(id), IsOk());
  EXPECT_EQ(*m->ApplyUpdate({.id = id, .generation = gen, .history = 6}), UpdateResult::kStale);
  EXPECT_EQ(m->Info(id, kTarget)->history, 5);
  EXPECT_EQ(m->Stats().stale_updates, 1);
}

// A deferred update to a suspended cache is stale (the cache cannot be resized); once
// resumed, the same cache takes the update.
TEST(KvManagerTest, SuspendedCacheTakesNoUpdate) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 8, 8);
  const RequestId id(1);
  ASSERT_THAT(m->CreateCache(id), IsOk());
  ASSERT_THAT(m->AdmitMirror(id), IsOk());
  ASSERT_THAT(m->Resize(id, kTarget, 8, 4), IsOk());
  ASSERT_THAT(m->Resize(id, kDraft, 8, 4), IsOk());
  ASSERT_THAT(m->Suspend(id), IsOk());
  for (const PoolKind pool : {kTarget, kDraft}) {
    const CacheUpdate update{id, pool, m->Info(id, pool)->generation, 8, 6};
    EXPECT_EQ(m->ApplyUpdate(update).value_or(UpdateResult::kApplied), UpdateResult::kStale);
    EXPECT_EQ(m->Info(id, pool)->history, 4);
  }
  EXPECT_EQ(m->Stats().stale_updates, 2);
  ASSERT_THAT(m->Resume(id), IsOk());
  const CacheUpdate update{id, kTarget, m->Info(id, kTarget)->generation, 8, 6};
  EXPECT_EQ(m->ApplyUpdate(update).value_or(UpdateResult::kStale), UpdateResult::kApplied);
  EXPECT_EQ(m->Info(id, kTarget)->history, 6);
}

TEST(KvManagerTest, GenerationsAreUniqueAcrossPoolsAndNeverReused) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 8, 8);
  std::vector<uint64_t> seen;
  for (int round = 0; round < 3; ++round) {
    for (int64_t i = 1; i <= 3; ++i) {
      ASSERT_THAT(m->CreateCache(RequestId(i)), IsOk());
      ASSERT_THAT(m->AdmitMirror(RequestId(i)), IsOk());
      seen.push_back(m->Info(RequestId(i), kTarget)->generation);
      seen.push_back(m->Info(RequestId(i), kDraft)->generation);
    }
    EXPECT_THAT(m->Ids(kDraft), ElementsAre(RequestId(1), RequestId(2), RequestId(3)));
    for (int64_t i = 3; i >= 1; --i) m->Release(RequestId(i));
  }
  std::vector<uint64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  EXPECT_THAT(sorted, SizeIs(18));
}

// Every pool is exhausted by other requests; the dummy still gets its reserved tokens.
TEST(KvManagerTest, DummyReservationHoldsInEveryPool) {
  for (const DraftMode mode : {DraftMode::kNone, DraftMode::kPaired, DraftMode::kUnpaired}) {
    SCOPED_TRACE(DraftModeName(mode));
    std::unique_ptr<KvManager> m = Make(mode, 8, 6, /*dummy_reserved_tokens=*/7);  // 2 blocks
    const RequestId other(1);
    ASSERT_THAT(m->CreateCache(other), IsOk());
    // Use up every general block: 6 in the target pool, 4 in the draft pool (the paired
    // draft pool bounds the pair at 4 blocks).
    const int64_t tokens = mode == DraftMode::kPaired ? 16 : 24;
    ASSERT_THAT(m->Resize(other, kTarget, tokens, 0), IsOk());
    if (mode == DraftMode::kUnpaired) {
      ASSERT_THAT(m->AdmitMirror(other), IsOk());
      ASSERT_THAT(m->Resize(other, kDraft, 16, 0), IsOk());
    }
    EXPECT_FALSE(m->CanGrow(other, 1));
    EXPECT_TRUE(m->CanGrow(m->dummy_id(), 7));

    ASSERT_THAT(m->CreateCache(m->dummy_id()), IsOk());
    ASSERT_THAT(m->Resize(m->dummy_id(), kTarget, 7, 0), IsOk());
    if (mode == DraftMode::kUnpaired) {
      ASSERT_THAT(m->AdmitMirror(m->dummy_id()), IsOk());
      ASSERT_THAT(m->Resize(m->dummy_id(), kDraft, 7, 0), IsOk());
    }
    if (mode != DraftMode::kNone) {
      EXPECT_EQ(m->Stats().draft->reserved_blocks, 0);
    }
    EXPECT_EQ(m->Stats().target.reserved_blocks, 0);
    // Nobody else ever got a reserved block.
    const std::vector<RequestId> live = {other};
    EXPECT_THAT(m->Audit(live, {}, true), IsEmpty());
    // Rolled back: the reserve is whole again.
    m->Release(m->dummy_id());
    EXPECT_EQ(m->Stats().target.reserved_blocks, 2);
    EXPECT_THAT(m->Audit(live, {}, false), IsEmpty());
  }
}

TEST(KvManagerTest, PrefixReuseNeverCoversTheLastPromptToken) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kNone, 16, 0);
  const std::vector<int32_t> prompt = Tokens(8, 50);  // exactly 2 blocks
  ASSERT_THAT(m->CreateCache(RequestId(1), prompt), IsOk());
  ASSERT_THAT(m->Resize(RequestId(1), kTarget, 8, 8), IsOk());
  ASSERT_THAT(m->Commit(RequestId(1), prompt), IsOk());
  EXPECT_EQ(m->Info(RequestId(1), kTarget)->committed, 8);
  EXPECT_EQ(m->ProbePrefix(prompt), 4);  // the second block holds the last token
  std::vector<int32_t> longer = prompt;
  longer.push_back(99);
  EXPECT_EQ(m->ProbePrefix(longer), 8);
  absl::StatusOr<int64_t> reused = m->CreateCache(RequestId(2), longer);
  ASSERT_THAT(reused, IsOk());
  EXPECT_EQ(*reused, 8);
  EXPECT_THAT(Table(*m, RequestId(2), kTarget), ElementsAreArray(Table(*m, RequestId(1), kTarget)));
  const CacheInfo info = *m->Info(RequestId(2), kTarget);
  EXPECT_EQ(info.committed, 8);
  EXPECT_EQ(info.history, 8);
  EXPECT_EQ(info.capacity, 8);
  EXPECT_EQ(m->Stats().reused_tokens, 8);
  EXPECT_EQ(m->Stats().target.used_blocks, 2);  // shared, not copied
  // The dummy never reuses.
  EXPECT_EQ(*m->CreateCache(m->dummy_id(), longer), 0);
  EXPECT_THAT(m->Audit({RequestId(1), RequestId(2)}, {}, true), IsEmpty());
  EXPECT_THAT(m->Commit(RequestId(3), prompt), StatusIs(absl::StatusCode::kNotFound));
}

TEST(KvManagerTest, ReuseOffReusesNothing) {
  KvManagerConfig config;
  config.target = Pool(16);
  config.target.enable_prefix_reuse = false;
  std::unique_ptr<KvManager> m = Make(config);
  const std::vector<int32_t> prompt = Tokens(13, 0);
  ASSERT_THAT(m->CreateCache(RequestId(1), prompt), IsOk());
  ASSERT_THAT(m->Resize(RequestId(1), kTarget, 13, 13), IsOk());
  ASSERT_THAT(m->Commit(RequestId(1), prompt), IsOk());
  EXPECT_EQ(m->ProbePrefix(prompt), 0);
  EXPECT_EQ(*m->CreateCache(RequestId(2), prompt), 0);
  m->Release(RequestId(1));
  EXPECT_EQ(m->Stats().target.cached_blocks, 0);
}

TEST(KvManagerTest, PairedReuseIsCommonToBothPools) {
  KvManagerConfig config;
  config.target = Pool(32, /*tpb=*/4);
  config.draft_mode = DraftMode::kPaired;
  config.draft = Pool(32, /*tpb=*/6);
  std::unique_ptr<KvManager> m = Make(config);
  const std::vector<int32_t> prompt = Tokens(30, 0);
  ASSERT_THAT(m->CreateCache(RequestId(1), prompt), IsOk());
  ASSERT_THAT(m->Resize(RequestId(1), kTarget, 30, 30), IsOk());
  ASSERT_THAT(m->Commit(RequestId(1), prompt), IsOk());
  EXPECT_EQ(m->Info(RequestId(1), kTarget)->committed, 28);
  EXPECT_EQ(m->Info(RequestId(1), kDraft)->committed, 30);
  // Prompt minus last token: 29 tokens. Target matches 28, draft 24; both end on a
  // block boundary at 24 (lcm(4, 6) = 12 granule).
  EXPECT_EQ(m->ProbePrefix(prompt), 24);
  ASSERT_THAT(m->CreateCache(RequestId(2), prompt), IsOk());
  EXPECT_EQ(m->Info(RequestId(2), kTarget)->capacity, 24);
  EXPECT_EQ(m->Info(RequestId(2), kDraft)->capacity, 24);
  EXPECT_THAT(Table(*m, RequestId(2), kTarget), SizeIs(6));
  EXPECT_THAT(Table(*m, RequestId(2), kDraft), SizeIs(4));
  EXPECT_THAT(m->Audit({RequestId(1), RequestId(2)}, {}, false), IsEmpty());
}

TEST(KvManagerTest, CanGrowChangesNothing) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 8, 4);
  ASSERT_THAT(m->CreateCache(RequestId(1), Tokens(9, 0)), IsOk());
  ASSERT_THAT(m->Resize(RequestId(1), kTarget, 9, 9), IsOk());
  ASSERT_THAT(m->Commit(RequestId(1), Tokens(9, 0)), IsOk());
  m->Release(RequestId(1));  // 2 cached blocks
  ASSERT_THAT(m->CreateCache(RequestId(2)), IsOk());
  const ManagerStats before = m->Stats();
  EXPECT_TRUE(m->CanGrow(RequestId(2), 16));   // target 4 blocks, new mirror 4 blocks
  EXPECT_FALSE(m->CanGrow(RequestId(2), 17));  // the draft pool has only 4
  EXPECT_TRUE(m->CanGrow(RequestId(9), 16));   // no cache: would a new one fit
  EXPECT_TRUE(m->CanGrow(RequestId(2), 0));
  const ManagerStats after = m->Stats();
  EXPECT_EQ(after.target.free_blocks, before.target.free_blocks);
  EXPECT_EQ(after.target.cached_blocks, before.target.cached_blocks);
  EXPECT_EQ(after.evicted_blocks, 0);
  EXPECT_EQ(m->ProbePrefix(Tokens(9, 0)), 8);
  // Evictable blocks count as free: the whole target pool is available.
  ASSERT_THAT(m->Resize(RequestId(2), kTarget, 32, 0), IsOk());
  EXPECT_EQ(m->Stats().evicted_blocks, 2);
  EXPECT_EQ(m->ProbePrefix(Tokens(9, 0)), 0);
}

TEST(KvManagerTest, AuditNamesOwnersAndPools) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 8, 8);
  ASSERT_THAT(m->CreateCache(RequestId(1)), IsOk());
  ASSERT_THAT(m->AdmitMirror(RequestId(1)), IsOk());
  ASSERT_THAT(m->CreateCache(RequestId(2)), IsOk());
  ASSERT_THAT(m->CreateCache(m->dummy_id()), IsOk());
  // 1 is live, 2 is claimed by a transfer, the dummy is current: clean.
  EXPECT_THAT(m->Audit({RequestId(1)}, {RequestId(2)}, true), IsEmpty());
  // Dummy not current, 2 not claimed: both named; 1 in both pools is fine.
  const std::vector<std::string> out = m->Audit({RequestId(1)}, {}, false);
  ASSERT_THAT(out, SizeIs(2));
  EXPECT_THAT(out[0], HasSubstr("target pool: request -1"));
  EXPECT_THAT(out[1], HasSubstr("target pool: request 2"));
  // Not live: flagged in both pools.
  EXPECT_THAT(m->Audit({}, {RequestId(2)}, true), SizeIs(2));
}

TEST(KvManagerTest, StorageIsOneSlabPerPool) {
  std::unique_ptr<KvManager> m = Make(DraftMode::kUnpaired, 8, 4);
  ASSERT_THAT(m->CreateCache(RequestId(1)), IsOk());
  ASSERT_THAT(m->Resize(RequestId(1), kTarget, 8, 0), IsOk());
  const BlockLayout& layout = m->layout(kTarget);
  std::byte* target = m->Storage(kTarget);
  ASSERT_NE(m->Storage(kDraft), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(target) % 64, 0u);
  // Write K of token 3 of block table entry 0 through the layout; read it back through
  // the copier.
  const BlockId b = m->BlockTable(RequestId(1), kTarget)[0];
  const size_t at = static_cast<size_t>(b.value()) * layout.BlockBytes() + layout.ByteOffset(0, 0, 0, 3);
  const float value = 1.25f;
  std::memcpy(target + at, &value, sizeof(value));
  float read = 0;
  ASSERT_THAT(m->Copier(kTarget)->CopyOut(
                  {{b, 3 * layout.head_dim * sizeof(float), sizeof(float)}},
                  absl::MakeSpan(reinterpret_cast<std::byte*>(&read), sizeof(read))),
              IsOk());
  EXPECT_EQ(read, 1.25f);
  EXPECT_EQ(m->Stats().target.total_blocks, 8);
  EXPECT_EQ(m->Stats().draft->total_blocks, 4);
}

}  // namespace
}  // namespace lockstep::kv
