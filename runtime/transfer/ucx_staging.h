// The context rank's UCX staging memory (docs/transfer-ucx.md): chunks that UCX
// allocates (UcxWorker::Allocate: in shared memory where UCX_TLS has shm, which a peer
// on the same host attaches once and then reads with plain copies, no emulated get)
// and keeps for reuse, so that a puller's cached remote key stays valid and the pages
// stay mapped and touched on both sides. Each offer takes one range of a chunk (first
// fit); the range goes back when its Range is destroyed.
//
// Chunks are `chunk_bytes` long (a larger offer gets a chunk of its own size); their
// total stays within `max_bytes`: when a new chunk would pass it, the chunks with
// nothing taken are freed first, and if that is not enough Take is refused.
//
// Thread safety: thread-safe. A Range may be destroyed on any thread, but before the
// pool.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_UCX_STAGING_H_
#define LOCKSTEP_RUNTIME_TRANSFER_UCX_STAGING_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/transfer/ucx_worker.h"

namespace lockstep::transfer {

class UcxStagingPool {
 public:
  struct Options {
    int64_t chunk_bytes = int64_t{64} << 20;
    int64_t max_bytes = int64_t{16} << 30;
  };

  // InvalidArgument for a null worker or sizes below 1.
  static absl::StatusOr<std::unique_ptr<UcxStagingPool>> Create(std::shared_ptr<UcxWorker> worker,
                                                                const Options& options);
  ~UcxStagingPool();
  UcxStagingPool(const UcxStagingPool&) = delete;
  UcxStagingPool& operator=(const UcxStagingPool&) = delete;

  // Bytes of one chunk taken for an offer; given back on destruction.
  class Range {
   public:
    Range() = default;
    Range(Range&& other) noexcept;
    Range& operator=(Range&& other) noexcept;
    ~Range();

    std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    // What a peer needs to read the range: its remote address and its chunk's key.
    uint64_t address() const { return reinterpret_cast<uint64_t>(data_); }
    const std::string& rkey() const { return region_->rkey(); }

   private:
    friend class UcxStagingPool;
    void Give();
    UcxStagingPool* pool_ = nullptr;
    int chunk_ = -1;  // index into the pool's chunks
    const UcxRegion* region_ = nullptr;  // the chunk's; lives while the range is taken
    size_t offset_ = 0;
    size_t taken_ = 0;  // size_ rounded up to the alignment
    std::byte* data_ = nullptr;
    size_t size_ = 0;
  };

  // Makes the first chunk now, if there is none, and touches its pages, so that the
  // first offer neither allocates and registers a chunk nor faults its pages in (in a
  // disaggregated bench that first pull took 21 ms on the context rank, against about
  // 2 ms later: docs/perf/ucx.md). Errors as Take's.
  absl::Status Warm() ABSL_LOCKS_EXCLUDED(mu_);

  // A range of `bytes` (>= 1). ResourceExhausted when it would pass max_bytes;
  // UCX's error (Unavailable, or the registration hook's) when a chunk cannot be made.
  absl::StatusOr<Range> Take(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t allocated_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t taken_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Chunk {
    std::unique_ptr<UcxRegion> region;  // null once freed (indices stay stable)
    std::map<size_t, size_t> free;      // offset -> length, non-adjacent
    size_t taken = 0;
  };
  UcxStagingPool(std::shared_ptr<UcxWorker> worker, const Options& options);
  // A new chunk of `bytes` in the first free slot; its index. UCX's error when it
  // cannot be made.
  absl::StatusOr<int> AddChunk(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // First fit in chunk `index`; false when no free range is long enough.
  bool TakeFrom(int index, size_t bytes, Range& range) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Give(int chunk, size_t offset, size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<UcxWorker> worker_;
  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  int64_t allocated_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t taken_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_UCX_STAGING_H_
