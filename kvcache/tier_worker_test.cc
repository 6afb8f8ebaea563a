#include "kvcache/tier_worker.h"

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/check.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "kvcache/testing/gated_copier.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int32_t kBlocks = 4;

BlockLayout Layout() {
  return BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = 2};
}

class TierWorkerTest : public ::testing::Test {
 protected:
  TierWorkerTest()
      : slab_(Layout().BlockBytes() * kBlocks), copier_(slab_.data(), Layout(), kBlocks) {
    for (size_t i = 0; i < slab_.size(); ++i) slab_[i] = static_cast<std::byte>(i * 7 + 1);
  }

  // A copy-down of `block`; `freed` (if given) is notified when the job is destroyed.
  std::shared_ptr<TierJob> CopyDown(int32_t block, absl::Notification* freed = nullptr) {
    std::shared_ptr<TierJob> job(new TierJob, [freed](TierJob* j) {
      delete j;
      if (freed != nullptr) freed->Notify();
    });
    job->kind = TierJob::Kind::kCopyDown;
    job->block = BlockId{block};
    job->bytes = std::make_shared<std::vector<std::byte>>(Layout().BlockBytes());
    return job;
  }
  std::vector<std::byte> BlockBytes(int32_t block) const {
    const size_t n = Layout().BlockBytes();
    return {slab_.begin() + static_cast<ptrdiff_t>(n * block),
            slab_.begin() + static_cast<ptrdiff_t>(n * (block + 1))};
  }

  std::vector<std::byte> slab_;
  GatedCopier copier_;
};

TEST_F(TierWorkerTest, TheOwnerRunsAQueuedJobItselfOrCancelsIt) {
  TierWorker worker(&copier_);
  auto first = CopyDown(0), second = CopyDown(1), third = CopyDown(2);
  ASSERT_THAT(worker.Enqueue(first), IsOk());
  copier_.started.WaitForNotification();  // the thread is inside `first`
  ASSERT_THAT(worker.Enqueue(second), IsOk());
  ASSERT_THAT(worker.Enqueue(third), IsOk());
  bool ran_here = false;
  EXPECT_THAT(worker.Finish(*second, &ran_here), IsOk());
  EXPECT_TRUE(ran_here) << "still queued: run by the caller";
  EXPECT_TRUE(worker.Done(*second));
  EXPECT_EQ(*second->bytes, BlockBytes(1));
  bool cancelled = false;
  EXPECT_THAT(worker.Cancel(*third, &cancelled), IsOk());
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(worker.Done(*third));
  EXPECT_FALSE(worker.Done(*first));
  copier_.release.Notify();
  EXPECT_THAT(worker.Finish(*first, &ran_here), IsOk());
  EXPECT_FALSE(ran_here) << "running on the thread: waited for";
  EXPECT_TRUE(worker.StatusOf(*first).ok());
  EXPECT_EQ(*first->bytes, BlockBytes(0));
  EXPECT_THAT(worker.Cancel(*first, &cancelled), IsOk());
  EXPECT_FALSE(cancelled) << "finished: nothing to cancel";
  EXPECT_THAT(worker.Flush(), IsOk());  // the cancelled job is skipped, not run
  int64_t offloaded = 0, offload_ns = 0, writes = 0, write_errors = 0;
  worker.Counters(&offloaded, &offload_ns, &writes, &write_errors);
  EXPECT_EQ(offloaded, 2);
  EXPECT_EQ(writes, 0);
  EXPECT_EQ(third->bytes->at(0), std::byte{0}) << "a cancelled copy-down never ran";
}

TEST_F(TierWorkerTest, DiskWritesAreVerifiableAndFailuresCounted) {
  copier_.started.Notify();  // no gate
  absl::StatusOr<std::unique_ptr<TierFile>> created = TierFile::Create(
      std::string(std::getenv("TEST_TMPDIR")) + "/blocks.kvt", 2, 2, Layout().BlockBytes());
  ASSERT_TRUE(created.ok()) << created.status();
  const std::shared_ptr<TierFile> file = *std::move(created);
  TierWorker worker(&copier_);
  auto write = std::make_shared<TierJob>();
  write->kind = TierJob::Kind::kDiskWrite;
  write->meta = TierBlockMeta{.key = 11, .parent_key = 5, .tokens = {3, 4}};
  write->file = file;
  write->slot = 1;
  write->bytes = std::make_shared<std::vector<std::byte>>(BlockBytes(3));
  auto bad = std::make_shared<TierJob>(*write);
  bad->slot = 2;  // past the file's slots: the write fails
  ASSERT_THAT(worker.Enqueue(write), IsOk());
  ASSERT_THAT(worker.Enqueue(bad), IsOk());
  EXPECT_THAT(worker.Flush(), IsOk());
  ASSERT_TRUE(worker.Done(*write) && worker.Done(*bad));
  EXPECT_TRUE(worker.StatusOf(*write).ok()) << worker.StatusOf(*write);
  EXPECT_FALSE(worker.StatusOf(*bad).ok());
  std::vector<std::byte> read(Layout().BlockBytes());
  ASSERT_TRUE(file->Read(1, write->meta, absl::MakeSpan(read)).ok());
  EXPECT_EQ(read, BlockBytes(3));
  int64_t offloaded = 0, offload_ns = 0, writes = 0, write_errors = 0;
  worker.Counters(&offloaded, &offload_ns, &writes, &write_errors);
  EXPECT_EQ(writes, 2);
  EXPECT_EQ(write_errors, 1);
  EXPECT_EQ(offloaded, 0);
}

TEST_F(TierWorkerTest, TheDestructorRunsWhatIsQueued) {
  copier_.started.Notify();  // no gate
  auto job = CopyDown(2);
  {
    TierWorker worker(&copier_);
    ASSERT_THAT(worker.Enqueue(job), IsOk());
  }
  EXPECT_EQ(job->state, TierJob::State::kDone);
  EXPECT_EQ(*job->bytes, BlockBytes(2));
}

// A copy-down stuck on the device (the gate held) past a tiny deadline: every wait for it
// ends with DEADLINE_EXCEEDED naming it, nothing more is queued, and nothing waits
// again; the worker's destructor leaves without it. When the job finally ends, it
// writes only into its own bytes and frees itself on the thread.
// A copy-down still running when the worker is destroyed (its zero deadline missed)
// keeps the device's owner, and so the copier and its memory, until it ended: the thread
// drops it then.
TEST_F(TierWorkerTest, ACopyDownLeftRunningKeepsTheDeviceOwnerUntilItEnds) {
  auto dropped = std::make_shared<absl::Notification>();
  std::shared_ptr<const void> owner(static_cast<const void*>(&copier_),
                                    [dropped](const void*) { dropped->Notify(); });
  auto worker = std::make_unique<TierWorker>(&copier_, absl::ZeroDuration(), std::move(owner));
  auto job = CopyDown(1);
  ASSERT_THAT(worker->Enqueue(job), IsOk());
  copier_.started.WaitForNotification();
  worker.reset();  // leaves the copy-down running
  EXPECT_FALSE(dropped->HasBeenNotified()) << "dropped while the copy-down reads the device";
  copier_.release.Notify();
  ASSERT_TRUE(dropped->WaitForNotificationWithTimeout(kTierJobDeadline));
  EXPECT_TRUE(copier_.finished.HasBeenNotified());
  EXPECT_EQ(*job->bytes, BlockBytes(1));
}

TEST_F(TierWorkerTest, AJobPastItsDeadlineEndsEveryWaitAndNothingIsQueuedBehindIt) {
  absl::Notification freed;
  std::shared_ptr<TierJob> stuck = CopyDown(0, &freed);
  const std::shared_ptr<std::vector<std::byte>> bytes = stuck->bytes;
  {
    TierWorker worker(&copier_, absl::ZeroDuration());
    ASSERT_THAT(worker.Enqueue(stuck), IsOk()) << "nothing ran yet";
    copier_.started.WaitForNotification();  // the thread is inside `stuck`
    bool ran_here = true;
    EXPECT_THAT(
        worker.Finish(*stuck, &ran_here),
        StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("copy-down of device block 0")));
    EXPECT_FALSE(ran_here);
    EXPECT_FALSE(worker.Done(*stuck));
    EXPECT_THAT(worker.stuck(), StatusIs(absl::StatusCode::kDeadlineExceeded));
    // Later jobs are refused at once, already done; no wait blocks again.
    auto later = CopyDown(1);
    EXPECT_THAT(worker.Enqueue(later), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                                HasSubstr("copy-down of device block 1")));
    EXPECT_TRUE(worker.Done(*later));
    EXPECT_THAT(worker.Finish(*later), StatusIs(absl::StatusCode::kDeadlineExceeded));
    EXPECT_EQ(later->bytes->at(0), std::byte{0}) << "a refused job never ran";
    EXPECT_THAT(worker.Cancel(*stuck), StatusIs(absl::StatusCode::kDeadlineExceeded));
    EXPECT_THAT(worker.Flush(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  }  // the destructor neither waits for `stuck` nor aborts
  stuck.reset();
  copier_.release.Notify();
  ASSERT_TRUE(freed.WaitForNotificationWithTimeout(kTierJobDeadline))
      << "the stuck job never ended";
  EXPECT_EQ(*bytes, BlockBytes(0)) << "it wrote its own bytes, still alive";
}

// The worker finds a job running past the deadline when more waits behind it, without
// a wait: what waits is cancelled, what comes later refused.
TEST_F(TierWorkerTest, JobsBehindAnOverdueJobAreCancelledOrRefused) {
  absl::Notification freed;
  std::shared_ptr<TierJob> first = CopyDown(0, &freed);
  auto second = CopyDown(1), third = CopyDown(2);
  {
    TierWorker worker(&copier_, absl::ZeroDuration());
    ASSERT_THAT(worker.Enqueue(first), IsOk());
    copier_.started.WaitForNotification();
    ASSERT_THAT(worker.Enqueue(second), IsOk()) << "nothing waits behind `first` yet";
    EXPECT_THAT(worker.Enqueue(third),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         HasSubstr("(copy-down of device block 0) still running after")));
    EXPECT_THAT(worker.stuck(), StatusIs(absl::StatusCode::kDeadlineExceeded));
    EXPECT_TRUE(worker.Done(*second));
    bool ran_here = true;
    EXPECT_THAT(worker.Finish(*second, &ran_here),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         HasSubstr("copy-down of device block 1 cancelled")));
    EXPECT_FALSE(ran_here) << "cancelled, not run";
    EXPECT_TRUE(worker.Done(*third));
  }
  EXPECT_EQ(second->bytes->at(0), std::byte{0});
  EXPECT_EQ(third->bytes->at(0), std::byte{0});
  first.reset();
  copier_.release.Notify();
  ASSERT_TRUE(freed.WaitForNotificationWithTimeout(kTierJobDeadline));
}

// A disk read of slot `slot` holding the block {key 11, parent 5, tokens {3, 4}}.
std::shared_ptr<TierJob> DiskRead(std::shared_ptr<TierFile> file, int64_t slot,
                                  absl::Notification* freed = nullptr) {
  std::shared_ptr<TierJob> job(new TierJob, [freed](TierJob* j) {
    delete j;
    if (freed != nullptr) freed->Notify();
  });
  job->kind = TierJob::Kind::kDiskRead;
  job->file = std::move(file);
  job->reads.push_back(
      TierJob::Read{.slot = slot,
                    .meta = TierBlockMeta{.key = 11, .parent_key = 5, .tokens = {3, 4}},
                    .bytes = std::make_shared<std::vector<std::byte>>(Layout().BlockBytes())});
  return job;
}

// Slots 0 and 1; slot 0 holds block 11 (DiskRead's) with block 1's bytes.
std::shared_ptr<TierFile> FileWithOneBlock(const std::vector<std::byte>& bytes) {
  absl::StatusOr<std::unique_ptr<TierFile>> created = TierFile::Create(
      std::string(std::getenv("TEST_TMPDIR")) + "/read.kvt", 2, 2, Layout().BlockBytes());
  LOCKSTEP_CHECK_OK(created.status());
  std::shared_ptr<TierFile> file = *std::move(created);
  LOCKSTEP_CHECK_OK(file->Write(0, {.key = 11, .parent_key = 5, .tokens = {3, 4}}, bytes));
  return file;
}

// A read queued behind a running copy-down and a queued write runs before the write,
// on the worker thread (the owner only waits), and returns the verified bytes.
TEST_F(TierWorkerTest, AnUrgentReadRunsFirstOnTheThread) {
  const std::shared_ptr<TierFile> file = FileWithOneBlock(BlockBytes(1));
  TierWorker worker(&copier_);
  auto copy_down = CopyDown(0);
  auto write = std::make_shared<TierJob>();
  write->kind = TierJob::Kind::kDiskWrite;
  write->meta = TierBlockMeta{.key = 12, .parent_key = 11, .tokens = {5, 6}};
  write->file = file;
  write->slot = 1;
  write->bytes = std::make_shared<std::vector<std::byte>>(BlockBytes(2));
  bool write_done_at_read = true;
  std::thread::id read_on;
  file->set_read_hook_for_test([&](int64_t) {
    write_done_at_read = worker.Done(*write);
    read_on = std::this_thread::get_id();
  });
  ASSERT_THAT(worker.Enqueue(copy_down), IsOk());
  copier_.started.WaitForNotification();
  ASSERT_THAT(worker.Enqueue(write), IsOk());
  auto read = DiskRead(file, 0);
  ASSERT_THAT(worker.Enqueue(read, /*urgent=*/true), IsOk());
  copier_.release.Notify();
  ASSERT_THAT(worker.Await(*read), IsOk());
  EXPECT_FALSE(write_done_at_read) << "the read ran after the write queued before it";
  EXPECT_NE(read_on, std::this_thread::get_id()) << "the owner ran the read";
  ASSERT_THAT(read->reads[0].status, IsOk());
  EXPECT_EQ(*read->reads[0].bytes, BlockBytes(1));
  EXPECT_THAT(worker.Flush(), IsOk());
  EXPECT_THAT(worker.StatusOf(*write), IsOk());
}

// A read stuck in the file system (the read hook held) past a tiny deadline: the wait
// ends with DEADLINE_EXCEEDED naming it and the worker is stuck; when the read ends, it
// writes only into its own bytes (still alive) and frees itself on the thread.
TEST_F(TierWorkerTest, AStuckReadEndsItsWaitAndFillsOnlyItsOwnBytes) {
  copier_.started.Notify();  // no gate
  struct Gate {
    absl::Notification started;
    absl::Notification release;
  };
  auto gate = std::make_shared<Gate>();
  std::shared_ptr<TierFile> file = FileWithOneBlock(BlockBytes(1));
  file->set_read_hook_for_test([gate](int64_t) {  // owned by the file, kept by the job
    gate->started.Notify();
    gate->release.WaitForNotification();
  });
  absl::Notification freed;
  std::shared_ptr<TierJob> read = DiskRead(std::move(file), 0, &freed);
  const std::shared_ptr<std::vector<std::byte>> bytes = read->reads[0].bytes;
  {
    TierWorker worker(&copier_, absl::ZeroDuration());
    ASSERT_THAT(worker.Enqueue(read, /*urgent=*/true), IsOk());
    gate->started.WaitForNotification();  // the thread is inside the read
    EXPECT_THAT(worker.Await(*read),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         HasSubstr("disk read of 1 block (the first, block 11, from slot 0)")));
    EXPECT_THAT(worker.stuck(), StatusIs(absl::StatusCode::kDeadlineExceeded));
    EXPECT_THAT(worker.Enqueue(DiskRead(read->file, 0), /*urgent=*/true),
                StatusIs(absl::StatusCode::kDeadlineExceeded));
  }  // the destructor leaves the read running
  read.reset();
  gate->release.Notify();
  ASSERT_TRUE(freed.WaitForNotificationWithTimeout(kTierJobDeadline)) << "the read never ended";
  EXPECT_EQ(*bytes, BlockBytes(1)) << "it read into its own bytes, still alive";
}

}  // namespace
}  // namespace lockstep::kv
