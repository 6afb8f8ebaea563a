#include "runtime/transfer/ucx_staging.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::transfer {
namespace {

// Ranges start at multiples of this (a cache line: copies into and out of them align).
constexpr size_t kAlignment = 64;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

UcxStagingPool::Range::Range(Range&& other) noexcept { *this = std::move(other); }

UcxStagingPool::Range& UcxStagingPool::Range::operator=(Range&& other) noexcept {
  if (this != &other) {
    Give();
    pool_ = std::exchange(other.pool_, nullptr);
    chunk_ = std::exchange(other.chunk_, -1);
    region_ = std::exchange(other.region_, nullptr);
    offset_ = std::exchange(other.offset_, 0);
    taken_ = std::exchange(other.taken_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

UcxStagingPool::Range::~Range() { Give(); }

void UcxStagingPool::Range::Give() {
  if (pool_ == nullptr) return;
  pool_->Give(chunk_, offset_, taken_);
  pool_ = nullptr;
}

UcxStagingPool::UcxStagingPool(std::shared_ptr<UcxWorker> worker, const Options& options)
    : worker_(std::move(worker)), options_(options) {}

UcxStagingPool::~UcxStagingPool() = default;

absl::StatusOr<std::unique_ptr<UcxStagingPool>> UcxStagingPool::Create(
    std::shared_ptr<UcxWorker> worker, const Options& options) {
  if (worker == nullptr) return absl::InvalidArgumentError("ucx staging: no UCX worker");
  if (options.chunk_bytes < 1 || options.max_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ucx staging: chunk_bytes (",
                                                   options.chunk_bytes, ") and max_bytes (",
                                                   options.max_bytes, ") must be >= 1"));
  }
  return std::unique_ptr<UcxStagingPool>(new UcxStagingPool(std::move(worker), options));
}

bool UcxStagingPool::TakeFrom(int index, size_t bytes, Range& range) {
  Chunk& chunk = chunks_[index];
  if (chunk.region == nullptr) return false;
  for (auto it = chunk.free.begin(); it != chunk.free.end(); ++it) {
    const auto [offset, length] = *it;
    if (length < bytes) continue;
    chunk.free.erase(it);
    if (length > bytes) chunk.free.emplace(offset + bytes, length - bytes);
    chunk.taken += bytes;
    taken_ += static_cast<int64_t>(bytes);
    range.pool_ = this;
    range.chunk_ = index;
    range.region_ = chunk.region.get();
    range.offset_ = offset;
    range.taken_ = bytes;
    range.data_ = chunk.region->data() + offset;
    return true;
  }
  return false;
}

absl::StatusOr<UcxStagingPool::Range> UcxStagingPool::Take(size_t bytes) {
  if (bytes < 1) return absl::InvalidArgumentError("ucx staging: a range of 0 bytes");
  const size_t rounded = RoundUp(bytes, kAlignment);
  Range range;
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < static_cast<int>(chunks_.size()); ++i) {
    if (TakeFrom(i, rounded, range)) {
      range.size_ = bytes;
      return range;
    }
  }
  const size_t chunk_bytes = std::max(rounded, static_cast<size_t>(options_.chunk_bytes));
  if (allocated_ + static_cast<int64_t>(chunk_bytes) > options_.max_bytes) {
    // Free the chunks nothing is taken from, then check again.
    for (Chunk& chunk : chunks_) {
      if (chunk.region == nullptr || chunk.taken > 0) continue;
      allocated_ -= static_cast<int64_t>(chunk.region->size());
      chunk.region.reset();
      chunk.free.clear();
    }
    if (allocated_ + static_cast<int64_t>(chunk_bytes) > options_.max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("UCX staging of ", bytes, " more bytes would pass ", options_.max_bytes,
                       " (", taken_, " taken in ", allocated_, " allocated)"));
    }
  }
  absl::StatusOr<int> index = AddChunk(chunk_bytes);
  if (!index.ok()) return index.status();
  TakeFrom(*index, rounded, range);
  range.size_ = bytes;
  return range;
}

absl::StatusOr<int> UcxStagingPool::AddChunk(size_t bytes) {
  absl::StatusOr<std::unique_ptr<UcxRegion>> region = worker_->Allocate(bytes);
  if (!region.ok()) return region.status();
  int index = 0;
  while (index < static_cast<int>(chunks_.size()) && chunks_[index].region != nullptr) ++index;
  if (index == static_cast<int>(chunks_.size())) chunks_.emplace_back();
  Chunk& chunk = chunks_[index];
  chunk.region = std::move(*region);
  chunk.free.clear();
  chunk.free.emplace(0, bytes);
  chunk.taken = 0;
  allocated_ += static_cast<int64_t>(bytes);
  return index;
}

absl::Status UcxStagingPool::Warm() {
  absl::MutexLock lock(&mu_);
  for (const Chunk& chunk : chunks_) {
    if (chunk.region != nullptr) return absl::OkStatus();
  }
  // A chunk over the bound would be refused to Take too.
  if (options_.chunk_bytes > options_.max_bytes) return absl::OkStatus();
  const size_t bytes = static_cast<size_t>(options_.chunk_bytes);
  absl::StatusOr<int> index = AddChunk(bytes);
  if (!index.ok()) return index.status();
  // Every page written once (nothing is taken yet): the first copies into it fault none.
  std::memset(chunks_[*index].region->data(), 0, bytes);
  return absl::OkStatus();
}

void UcxStagingPool::Give(int index, size_t offset, size_t bytes) {
  absl::MutexLock lock(&mu_);
  Chunk& chunk = chunks_[index];
  chunk.taken -= bytes;
  taken_ -= static_cast<int64_t>(bytes);
  auto [it, inserted] = chunk.free.emplace(offset, bytes);
  // Merge with the free range after it, then with the one before it.
  if (auto next = std::next(it); next != chunk.free.end() && offset + bytes == next->first) {
    it->second += next->second;
    chunk.free.erase(next);
  }
  if (it != chunk.free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == offset) {
      prev->second += it->second;
      chunk.free.erase(it);
    }
  }
}

int64_t UcxStagingPool::allocated_bytes() const {
  absl::MutexLock lock(&mu_);
  return allocated_;
}

int64_t UcxStagingPool::taken_bytes() const {
  absl::MutexLock lock(&mu_);
  return taken_;
}

}  // namespace lockstep::transfer
