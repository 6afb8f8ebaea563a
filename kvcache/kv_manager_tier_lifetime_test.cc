// KvManager with tiers destroyed while a copy-down still runs on the tier worker's
// thread (a device stuck past the job deadline, here zero): the copy-down must still
// read live memory, its pool's copier and slab, which are freed only once it ended.
// The copy-down is held on a gate; the allocator notes when the slab is freed, and the
// held copy reports whether it was let go after that (it then touches nothing).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_copier.h"
#include "kvcache/kv_manager.h"
#include "kvcache/testing/token_run.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;

constexpr absl::Duration kWait = absl::Seconds(60);

// Shared by the test, the allocator and the copier: outlives both.
struct Gate {
  absl::Notification started;   // the first copy-out began
  absl::Notification release;   // set by the test: it may go on
  absl::Notification finished;  // it ended
  absl::Notification freed;     // the slab was given back to the allocator
  std::atomic<bool> slab_freed{false};
  std::atomic<bool> ran_on_freed{false};  // the held copy-out went on after the free
};

// A host copier whose first copy-out holds until the gate is released.
class GateCopier : public HostBlockCopier {
 public:
  GateCopier(std::byte* base, const BlockLayout& layout, int32_t blocks, std::shared_ptr<Gate> gate)
      : HostBlockCopier(base, layout, blocks), gate_(std::move(gate)) {}

 protected:
  absl::Status DoCopyOut(absl::Span<const BlockSpan> spans, absl::Span<std::byte> host) override {
    // Its own reference: if the copier is freed while held, this frame touches only it.
    const std::shared_ptr<Gate> gate = gate_;
    if (gate->started.HasBeenNotified()) return HostBlockCopier::DoCopyOut(spans, host);
    gate->started.Notify();
    gate->release.WaitForNotificationWithTimeout(kWait);
    if (gate->slab_freed.load()) {
      gate->ran_on_freed = true;
      gate->finished.Notify();
      return absl::InternalError("the pool was freed under a running copy-down");
    }
    absl::Status status = HostBlockCopier::DoCopyOut(spans, host);
    gate->finished.Notify();
    return status;
  }

 private:
  const std::shared_ptr<Gate> gate_;
};

// Host memory whose copiers are GateCopiers; notes when a slab is freed.
class GateAllocator : public HostAllocator {
 public:
  explicit GateAllocator(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}
  absl::StatusOr<std::unique_ptr<BlockCopier>> MakeCopier(std::byte* base,
                                                          const BlockLayout& layout,
                                                          int32_t num_blocks) override {
    return std::make_unique<GateCopier>(base, layout, num_blocks, gate_);
  }
  void Free(std::byte* p, size_t bytes) override {
    gate_->slab_freed = true;
    HostAllocator::Free(p, bytes);
    gate_->freed.Notify();
  }

 private:
  const std::shared_ptr<Gate> gate_;
};

TEST(KvManagerTierLifetimeTest, ACopyDownRunningPastTheManagerReadsLiveMemory) {
  auto gate = std::make_shared<Gate>();
  GateAllocator allocator(gate);  // outlives the manager and its copy-downs
  KvManagerConfig config;
  config.target.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = 2};
  config.target.num_blocks = 8;
  config.tiers.host_bytes = 4 * static_cast<int64_t>(config.target.layout.BlockBytes());
  config.tiers.job_deadline = absl::ZeroDuration();  // the destructor waits for nothing
  absl::StatusOr<std::unique_ptr<KvManager>> kv = KvManager::Create(config, &allocator);
  ASSERT_THAT(kv.status(), IsOk());

  // A request's committed blocks become evictable on release: their copy-downs queue.
  const std::vector<int32_t> prompt = Tokens(8, 100);
  ASSERT_THAT((*kv)->CreateCache(RequestId(1), prompt).status(), IsOk());
  ASSERT_THAT((*kv)->Resize(RequestId(1), PoolKind::kTarget, 8, 8), IsOk());
  ASSERT_THAT((*kv)->Commit(RequestId(1), prompt), IsOk());
  (*kv)->Release(RequestId(1));
  ASSERT_TRUE(gate->started.WaitForNotificationWithTimeout(kWait)) << "no copy-down ran";

  kv->reset();  // the pool, its copier and its slab: the copy-down still runs
  gate->release.Notify();
  ASSERT_TRUE(gate->finished.WaitForNotificationWithTimeout(kWait));
  EXPECT_FALSE(gate->ran_on_freed.load())
      << "the copy-down went on reading a pool the destroyed manager had freed";
  // Freed once the copy-down ended (on the worker's thread): nothing is leaked.
  EXPECT_TRUE(gate->freed.WaitForNotificationWithTimeout(kWait));
}

}  // namespace
}  // namespace lockstep::kv
