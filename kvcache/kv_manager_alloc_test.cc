// The hot paths allocate no memory once warm: growth by a block, shrink, Release,
// ApplyUpdate, CanGrow, and re-creating a cache in a recycled slot. Counts every global
// operator new in this test binary.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) std::abort();
  return p;
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;

TEST(KvManagerAllocTest, HotPathsDoNotAllocateOnceWarm) {
  for (const DraftMode mode : {DraftMode::kNone, DraftMode::kPaired, DraftMode::kUnpaired}) {
    SCOPED_TRACE(DraftModeName(mode));
    KvManagerConfig config;
    config.target.layout.tokens_per_block = 16;
    config.target.num_blocks = 256;
    config.draft_mode = mode;
    config.draft = config.target;
    absl::StatusOr<std::unique_ptr<KvManager>> created = KvManager::Create(config);
    ASSERT_THAT(created, IsOk());
    KvManager& m = **created;
    const RequestId id(7);
    // Warm up: a slot and a 64-block table exist once; then the cache is recycled.
    ASSERT_THAT(m.CreateCache(id), IsOk());
    if (mode == DraftMode::kUnpaired) {
      ASSERT_THAT(m.AdmitMirror(id), IsOk());
    }
    ASSERT_THAT(m.Resize(id, PoolKind::kTarget, 64 * 16, std::nullopt), IsOk());
    if (mode == DraftMode::kUnpaired) {
      ASSERT_THAT(m.Resize(id, PoolKind::kDraft, 64 * 16, std::nullopt), IsOk());
    }
    m.Release(id);

    // Measured window: no gtest macros inside (matchers allocate); results checked after.
    const int64_t before = g_allocations.load();
    bool ok = m.CreateCache(id).ok();
    if (mode == DraftMode::kUnpaired) ok = ok && m.AdmitMirror(id).ok();
    for (int64_t blocks = 1; blocks <= 64; ++blocks) {
      ok = ok && m.CanGrow(id, 16);
      ok = ok && m.Resize(id, PoolKind::kTarget, blocks * 16, blocks).ok();
      if (mode == DraftMode::kUnpaired) {
        ok = ok && m.Resize(id, PoolKind::kDraft, blocks * 16, std::nullopt).ok();
      }
    }
    const uint64_t generation = m.Info(id, PoolKind::kTarget)->generation;
    absl::StatusOr<UpdateResult> applied =
        m.ApplyUpdate({.id = id, .generation = generation, .capacity = 60 * 16, .history = 64});
    absl::StatusOr<UpdateResult> stale =
        m.ApplyUpdate({.id = id, .generation = generation + 100, .history = 0});
    const int closed = m.Release(id);
    const int64_t allocations = g_allocations.load() - before;

    EXPECT_EQ(allocations, 0);
    EXPECT_TRUE(ok);
    ASSERT_THAT(applied, IsOk());
    EXPECT_EQ(*applied, UpdateResult::kApplied);
    ASSERT_THAT(stale, IsOk());
    EXPECT_EQ(*stale, UpdateResult::kStale);
    EXPECT_EQ(closed, mode == DraftMode::kNone ? 1 : 2);
  }
}

}  // namespace
}  // namespace lockstep::kv
