// KvTiers when a worker job is stuck (a device or disk that stopped answering): the
// job's deadline is injected (zero) and the job held on a gate, so nothing here
// depends on how fast the machine is.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/check.h"
#include "common/ids.h"
#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_events.h"
#include "kvcache/kv_tiers.h"
#include "kvcache/testing/gated_copier.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::PollUntil;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kBlocks = 8;
constexpr int32_t kStuckBlock = 7;

BlockLayout Layout() {
  return BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = 2};
}

// The block named `key` holds tokens {key, key} after parent `key - 1`.
TierBlockMeta Meta(uint64_t key) {
  return TierBlockMeta{.key = key,
                       .parent_key = key - 1,
                       .tokens = {static_cast<int32_t>(key), static_cast<int32_t>(key)}};
}

// The keys the tiers reported removed, in order.
struct RemovedKeys : KvEventObserver {
  void OnCommitted(uint64_t) override {}
  void OnEvicted(uint64_t) override {}
  void OnRemovedBelow(uint64_t key, Tier) override { removed.push_back(key); }
  std::vector<uint64_t> removed;
};

class KvTiersStuckTest : public ::testing::Test {
 protected:
  KvTiersStuckTest()
      : slab_(kBlocks * Layout().BlockBytes()),
        copier_(slab_.data(), Layout(), kBlocks, kStuckBlock) {}

  // 2 host blocks, 2 disk slots; every wait for a running job misses its deadline.
  std::unique_ptr<KvTiers> Make() {
    const TierConfig config{
        .host_bytes = 2 * static_cast<int64_t>(Layout().BlockBytes()),
        .disk_path = std::string(std::getenv("TEST_TMPDIR")) + "/tiers",
        .disk_bytes = 2 * static_cast<int64_t>(TierFileBytes(2, Layout().BlockBytes()))};
    absl::StatusOr<std::unique_ptr<KvTiers>> tiers =
        KvTiers::Create(config, &copier_, absl::ZeroDuration());
    LOCKSTEP_CHECK_OK(tiers.status());
    (*tiers)->set_event_observer(&events_);
    return *std::move(tiers);
  }
  // Waits until the worker has finished `offloaded` copy-downs and `writes` disk writes
  // (so no wait below finds a job running).
  static void AwaitWorker(const KvTiers& tiers, int64_t offloaded, int64_t writes) {
    ASSERT_TRUE(PollUntil(
        [&] {
          const TierStats s = tiers.Stats();
          return s.offloaded_blocks == offloaded && s.disk_writes == writes;
        },
        kTierJobDeadline));
  }
  // Blocks 1, 2, 3 (keys 10, 20, 30) evicted in turn, each copy-down and write done:
  // 20 and 30 in the host tier, 10 spilled to disk.
  static void FillHostAndSpillOne(KvTiers& tiers) {
    tiers.OnEvictable(BlockId(1), Meta(10));
    AwaitWorker(tiers, 1, 0);
    tiers.OnEvictable(BlockId(2), Meta(20));
    AwaitWorker(tiers, 2, 0);
    tiers.OnEvictable(BlockId(3), Meta(30));  // 10 goes to disk
    AwaitWorker(tiers, 3, 1);
  }
  static std::vector<std::string> Audit(const KvTiers& tiers) {
    std::vector<std::string> out;
    tiers.AuditInto("", &out);
    return out;
  }

  std::vector<std::byte> slab_;
  GatedCopier copier_;
  RemovedKeys events_;
};

TEST_F(KvTiersStuckTest, AStuckCopyDownTurnsTheTiersOffAndEveryBlockIsRecomputed) {
  std::unique_ptr<KvTiers> tiers = Make();
  FillHostAndSpillOne(*tiers);
  ASSERT_EQ(tiers->Where(10), Tier::kDisk);
  ASSERT_NE(tiers->Pin(20, 19, Meta(20).tokens), nullptr);  // kept while pinned

  // 30 goes to disk; block 7's copy-down gets stuck on the device.
  tiers->OnEvictable(BlockId(kStuckBlock), Meta(70));
  copier_.started.WaitForNotification();
  ASSERT_EQ(tiers->Where(30), Tier::kDisk);
  tiers->BeforeReuse(BlockId(kStuckBlock));  // the wait misses its deadline; no abort
  EXPECT_THAT(tiers->failed(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("copy-down of device block 7")));
  EXPECT_EQ(tiers->Stats().stuck_jobs, 1);
  EXPECT_EQ(tiers->Where(70), Tier::kDevice) << "its bytes are never served";
  EXPECT_THAT(Audit(*tiers), IsEmpty());

  // Off: nothing is found (the prefill recomputes), pinned or stored.
  Tier from;
  EXPECT_FALSE(tiers->Fetch(10, &from).ok());
  FetchedBlocks fetched;
  const BlockHasher next = [](uint64_t parent, absl::Span<const int32_t>) { return parent + 1; };
  EXPECT_EQ(tiers->FetchChain(next, 9, std::vector<int32_t>{10, 10}, 1, false, &fetched), 0);
  EXPECT_EQ(tiers->Pin(30, 29, Meta(30).tokens), nullptr);
  EXPECT_THAT(tiers->Flush(), StatusIs(absl::StatusCode::kDeadlineExceeded));

  // The next evictable block is not stored, and drops what is not pinned.
  tiers->OnEvictable(BlockId(4), Meta(40));
  EXPECT_EQ(tiers->Where(40), Tier::kDevice);
  EXPECT_EQ(tiers->Where(10), Tier::kDevice);
  EXPECT_EQ(tiers->Where(30), Tier::kDevice);
  EXPECT_EQ(tiers->Where(20), Tier::kHost) << "pinned: a transfer still reads it";
  tiers->Unpin(20);
  tiers->OnEvictable(BlockId(5), Meta(50));
  const TierStats stats = tiers->Stats();
  EXPECT_EQ(stats.host_blocks, 0);
  EXPECT_EQ(stats.disk_blocks, 0);
  EXPECT_EQ(stats.stuck_jobs, 1);
  EXPECT_THAT(Audit(*tiers), IsEmpty());
  EXPECT_THAT(std::set<uint64_t>(events_.removed.begin(), events_.removed.end()),
              ElementsAre(10, 20, 30, 70))
      << "every stored key is reported removed";

  // Shutting down neither waits for the stuck job nor aborts; when it ends, it
  // writes only into its own bytes.
  tiers.reset();
  copier_.release.Notify();
  ASSERT_TRUE(copier_.finished.WaitForNotificationWithTimeout(kTierJobDeadline));
}

// A fetch that waits for a stuck copy-down is a miss, and the tiers are off.
TEST_F(KvTiersStuckTest, AFetchOfABlockStuckCopyingDownIsAMiss) {
  std::unique_ptr<KvTiers> tiers = Make();
  tiers->OnEvictable(BlockId(kStuckBlock), Meta(70));
  copier_.started.WaitForNotification();
  Tier from;
  EXPECT_THAT(tiers->Fetch(70, &from).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("did not finish")));
  EXPECT_EQ(tiers->Stats().stuck_jobs, 1);
  EXPECT_EQ(tiers->Where(70), Tier::kDevice);
  tiers->OnEvictable(BlockId(1), Meta(10));
  EXPECT_EQ(tiers->Where(10), Tier::kDevice);
  EXPECT_THAT(Audit(*tiers), IsEmpty());
  copier_.release.Notify();
  ASSERT_TRUE(copier_.finished.WaitForNotificationWithTimeout(kTierJobDeadline));
  tiers.reset();  // the job may have ended or not: either way no wait, no abort
}

// A disk read stuck in the file system (the file's read hook held): the fetch is a miss
// (recomputed), the tiers turn off, and the rank goes on storing nothing. Whether the
// read was still queued or already running when its zero deadline passed, the owner
// sees the same.
TEST_F(KvTiersStuckTest, AStuckDiskReadIsAMissAndTheTiersTurnOff) {
  copier_.started.Notify();  // no copy-down gated here
  std::unique_ptr<KvTiers> tiers = Make();
  // Each copy-down done before the next eviction waits for it (its deadline is zero).
  FillHostAndSpillOne(*tiers);
  ASSERT_EQ(tiers->Where(10), Tier::kDisk);
  struct Gate {
    absl::Notification release;
  };
  auto gate = std::make_shared<Gate>();
  tiers->disk_file()->set_read_hook_for_test(
      [gate](int64_t) { gate->release.WaitForNotification(); });

  FetchedBlocks fetched;
  const BlockHasher next = [](uint64_t parent, absl::Span<const int32_t>) { return parent + 1; };
  EXPECT_EQ(tiers->FetchChain(next, 9, std::vector<int32_t>{10, 10}, 1, false, &fetched), 0);
  EXPECT_THAT(fetched.keys, IsEmpty());
  EXPECT_THAT(tiers->failed(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("disk read of 1 block")));
  EXPECT_EQ(tiers->Stats().stuck_jobs, 1);
  EXPECT_EQ(tiers->Stats().disk_corrupt, 0) << "stuck, not damaged";
  Tier from;
  EXPECT_FALSE(tiers->Fetch(20, &from).ok());

  // Serving on: the next evictable block stores nothing and drops what is below.
  tiers->OnEvictable(BlockId(4), Meta(40));
  EXPECT_EQ(tiers->Where(40), Tier::kDevice);
  EXPECT_EQ(tiers->Where(10), Tier::kDevice);
  EXPECT_EQ(tiers->Where(20), Tier::kDevice);
  EXPECT_THAT(Audit(*tiers), IsEmpty());
  gate->release.Notify();
  tiers.reset();  // neither waits for the read nor aborts
}

// A disk read queued behind a copy-down stuck on the device is refused at once (the
// owner would wait for it): a miss, and the tiers are off.
TEST_F(KvTiersStuckTest, ADiskReadBehindAStuckCopyDownIsAMiss) {
  std::unique_ptr<KvTiers> tiers = Make();
  FillHostAndSpillOne(*tiers);
  tiers->OnEvictable(BlockId(kStuckBlock), Meta(70));  // 20 goes to disk; 70 gets stuck
  copier_.started.WaitForNotification();
  ASSERT_EQ(tiers->Where(10), Tier::kDisk);
  Tier from;
  EXPECT_THAT(tiers->Fetch(10, &from).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("(copy-down of device block 7) still running after")));
  EXPECT_THAT(tiers->failed(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(tiers->Stats().stuck_jobs, 1);
  tiers->OnEvictable(BlockId(4), Meta(40));
  EXPECT_EQ(tiers->Where(10), Tier::kDevice);
  EXPECT_THAT(Audit(*tiers), IsEmpty());
  copier_.release.Notify();
  ASSERT_TRUE(copier_.finished.WaitForNotificationWithTimeout(kTierJobDeadline));
  tiers.reset();
}

}  // namespace
}  // namespace lockstep::kv
