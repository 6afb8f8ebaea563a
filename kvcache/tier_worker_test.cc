#include "kvcache/tier_worker.h"

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {
namespace {

constexpr int32_t kBlocks = 4;

BlockLayout Layout() {
  return BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = 2};
}

// A host slab whose first copy-out waits for `release` (after notifying `started`), so
// a test knows the worker thread is busy and later jobs are still queued.
class GatedCopier : public HostBlockCopier {
 public:
  explicit GatedCopier(std::byte* base) : HostBlockCopier(base, Layout(), kBlocks) {}
  absl::Notification started;
  absl::Notification release;

 protected:
  absl::Status DoCopyOut(absl::Span<const BlockSpan> spans, absl::Span<std::byte> host) override {
    if (!started.HasBeenNotified()) {
      started.Notify();
      release.WaitForNotification();
    }
    return HostBlockCopier::DoCopyOut(spans, host);
  }
};

class TierWorkerTest : public ::testing::Test {
 protected:
  TierWorkerTest() : slab_(Layout().BlockBytes() * kBlocks), copier_(slab_.data()) {
    for (size_t i = 0; i < slab_.size(); ++i) slab_[i] = static_cast<std::byte>(i * 7 + 1);
  }

  std::shared_ptr<TierJob> CopyDown(int32_t block) {
    auto job = std::make_shared<TierJob>();
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
  worker.Enqueue(first);
  copier_.started.WaitForNotification();  // the thread is inside `first`
  worker.Enqueue(second);
  worker.Enqueue(third);
  EXPECT_TRUE(worker.Finish(*second)) << "still queued: run by the caller";
  EXPECT_TRUE(worker.Done(*second));
  EXPECT_EQ(*second->bytes, BlockBytes(1));
  EXPECT_TRUE(worker.Cancel(*third));
  EXPECT_TRUE(worker.Done(*third));
  EXPECT_FALSE(worker.Done(*first));
  copier_.release.Notify();
  EXPECT_FALSE(worker.Finish(*first)) << "running on the thread: waited for";
  EXPECT_TRUE(worker.StatusOf(*first).ok());
  EXPECT_EQ(*first->bytes, BlockBytes(0));
  EXPECT_FALSE(worker.Cancel(*first)) << "finished: nothing to cancel";
  worker.Flush();  // the cancelled job is skipped, not run
  int64_t offloaded = 0, offload_ns = 0, writes = 0, write_errors = 0;
  worker.Counters(&offloaded, &offload_ns, &writes, &write_errors);
  EXPECT_EQ(offloaded, 2);
  EXPECT_EQ(writes, 0);
  EXPECT_EQ(third->bytes->at(0), std::byte{0}) << "a cancelled copy-down never ran";
}

TEST_F(TierWorkerTest, DiskWritesAreVerifiableAndFailuresCounted) {
  copier_.started.Notify();  // no gate
  absl::StatusOr<std::unique_ptr<TierFile>> file = TierFile::Create(
      std::string(std::getenv("TEST_TMPDIR")) + "/blocks.kvt", 2, 2, Layout().BlockBytes());
  ASSERT_TRUE(file.ok()) << file.status();
  TierWorker worker(&copier_);
  auto write = std::make_shared<TierJob>();
  write->kind = TierJob::Kind::kDiskWrite;
  write->meta = TierBlockMeta{.key = 11, .parent_key = 5, .tokens = {3, 4}};
  write->file = file->get();
  write->slot = 1;
  write->bytes = std::make_shared<std::vector<std::byte>>(BlockBytes(3));
  auto bad = std::make_shared<TierJob>(*write);
  bad->slot = 2;  // past the file's slots: the write fails
  worker.Enqueue(write);
  worker.Enqueue(bad);
  worker.Flush();
  ASSERT_TRUE(worker.Done(*write) && worker.Done(*bad));
  EXPECT_TRUE(worker.StatusOf(*write).ok()) << worker.StatusOf(*write);
  EXPECT_FALSE(worker.StatusOf(*bad).ok());
  std::vector<std::byte> read(Layout().BlockBytes());
  ASSERT_TRUE((*file)->Read(1, write->meta, absl::MakeSpan(read)).ok());
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
    worker.Enqueue(job);
  }
  EXPECT_EQ(job->state, TierJob::State::kDone);
  EXPECT_EQ(*job->bytes, BlockBytes(2));
}

}  // namespace
}  // namespace lockstep::kv
