// UcxStagingPool over the transports UCX_TLS names (the BUILD file runs it with shm and
// with tcp): ranges are carved from reused UCX-allocated chunks, a peer reads them, and
// the pool stays within its bound.
#include "runtime/transfer/ucx_staging.h"

#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/testing/ucx_workers.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::lockstep::transfer::testing::MakeWorker;
using ::testing::HasSubstr;

#define ASSERT_OK(expr) LOCKSTEP_ASSERT_OK(expr)

constexpr int64_t kChunk = 1 << 20;

std::unique_ptr<UcxStagingPool> MakePool(std::shared_ptr<UcxWorker> worker, int64_t max_bytes) {
  absl::StatusOr<std::unique_ptr<UcxStagingPool>> pool =
      UcxStagingPool::Create(std::move(worker), {.chunk_bytes = kChunk, .max_bytes = max_bytes});
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? std::move(*pool) : nullptr;
}

TEST(UcxStagingPoolTest, RangesShareAChunkAndComeBackForReuse) {
  std::shared_ptr<UcxWorker> worker = MakeWorker("context");
  ASSERT_NE(worker, nullptr);
  std::unique_ptr<UcxStagingPool> pool = MakePool(worker, 8 * kChunk);
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<UcxStagingPool::Range> a = pool->Take(1000);
  absl::StatusOr<UcxStagingPool::Range> b = pool->Take(3000);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(a->size(), 1000u);
  EXPECT_EQ(b->size(), 3000u);
  EXPECT_EQ(a->rkey(), b->rkey());  // one chunk, one key
  EXPECT_GE(b->address(), a->address() + 1000);  // disjoint
  EXPECT_EQ(b->address() % 64, 0u);
  EXPECT_EQ(pool->allocated_bytes(), kChunk);
  const uint64_t first = a->address();
  *a = UcxStagingPool::Range();  // given back
  absl::StatusOr<UcxStagingPool::Range> c = pool->Take(900);
  ASSERT_OK(c);
  EXPECT_EQ(c->address(), first);  // the same bytes again: first fit
  // A range larger than a chunk gets a chunk of its own.
  absl::StatusOr<UcxStagingPool::Range> big = pool->Take(3 * kChunk + 5);
  ASSERT_OK(big);
  EXPECT_EQ(pool->allocated_bytes(), kChunk + 3 * kChunk + 64);
  big = UcxStagingPool::Range();
  b = UcxStagingPool::Range();
  c = UcxStagingPool::Range();
  EXPECT_EQ(pool->taken_bytes(), 0);
  EXPECT_EQ(pool->allocated_bytes(), kChunk + 3 * kChunk + 64);  // kept for reuse
}

TEST(UcxStagingPoolTest, WarmMakesTheFirstChunkOnceAndTakeUsesIt) {
  std::shared_ptr<UcxWorker> worker = MakeWorker("context");
  ASSERT_NE(worker, nullptr);
  std::unique_ptr<UcxStagingPool> pool = MakePool(worker, 8 * kChunk);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->allocated_bytes(), 0);
  ASSERT_OK(pool->Warm());
  EXPECT_EQ(pool->allocated_bytes(), kChunk);
  EXPECT_EQ(pool->taken_bytes(), 0);
  absl::StatusOr<UcxStagingPool::Range> a = pool->Take(1000);
  ASSERT_OK(a);
  ASSERT_OK(pool->Warm());  // a chunk exists: nothing more
  EXPECT_EQ(pool->allocated_bytes(), kChunk);
  // Over a bound smaller than a chunk, no chunk is made (Take would refuse it too).
  std::unique_ptr<UcxStagingPool> small = MakePool(worker, kChunk / 2);
  ASSERT_NE(small, nullptr);
  ASSERT_OK(small->Warm());
  EXPECT_EQ(small->allocated_bytes(), 0);
}

TEST(UcxStagingPoolTest, StaysWithinItsBoundFreeingIdleChunksFirst) {
  std::shared_ptr<UcxWorker> worker = MakeWorker("context");
  ASSERT_NE(worker, nullptr);
  std::unique_ptr<UcxStagingPool> pool = MakePool(worker, 2 * kChunk);
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<UcxStagingPool::Range> a = pool->Take(kChunk);
  absl::StatusOr<UcxStagingPool::Range> b = pool->Take(kChunk);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_THAT(pool->Take(1).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("would pass")));
  *b = UcxStagingPool::Range();
  // 2 chunks' worth more would pass the bound even once the idle chunk is freed.
  EXPECT_THAT(pool->Take(2 * kChunk).status(), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(pool->allocated_bytes(), kChunk);  // the idle one went
  ASSERT_OK(pool->Take(kChunk));
}

TEST(UcxStagingPoolTest, AChunkThatCannotBeMadeIsUcxsError) {
  std::shared_ptr<UcxWorker> worker = MakeWorker(
      "context", {.fail_registration = [] { return absl::UnavailableError("no memory to pin"); }});
  ASSERT_NE(worker, nullptr);
  std::unique_ptr<UcxStagingPool> pool = MakePool(worker, 8 * kChunk);
  ASSERT_NE(pool, nullptr);
  EXPECT_THAT(pool->Take(10).status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no memory to pin")));
  EXPECT_THAT(pool->Warm(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no memory to pin")));
  EXPECT_EQ(pool->allocated_bytes(), 0);
}

TEST(UcxStagingPoolTest, APeerReadsTheRangesOfReusedChunks) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::shared_ptr<UcxWorker> owner = MakeWorker("context");
  std::shared_ptr<UcxWorker> reader = MakeWorker("generation");
  ASSERT_NE(owner, nullptr);
  ASSERT_NE(reader, nullptr);
  std::unique_ptr<UcxStagingPool> pool = MakePool(owner, 8 * kChunk);
  ASSERT_NE(pool, nullptr);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 6; ++round) {
    const size_t size = 1 + rng() % (kChunk + kChunk / 2);
    absl::StatusOr<UcxStagingPool::Range> range = pool->Take(size);
    ASSERT_OK(range);
    std::vector<std::byte> want(size);
    for (std::byte& b : want) b = static_cast<std::byte>(rng());
    std::memcpy(range->data(), want.data(), size);
    std::shared_ptr<std::byte[]> got(new std::byte[size]);
    ASSERT_OK(reader->Get(owner->address(), range->rkey(), range->address(), {got.get(), size},
                          got, absl::Now() + absl::Seconds(30), nullptr));
    EXPECT_EQ(std::memcmp(got.get(), want.data(), size), 0) << "round " << round << ", " << size;
  }
  EXPECT_EQ(pool->taken_bytes(), 0);
}

}  // namespace
}  // namespace lockstep::transfer
