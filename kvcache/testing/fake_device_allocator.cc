#include "kvcache/testing/fake_device_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace lockstep::kv::testing {

// Translates block spans to the shadow and counts.
class FakeDeviceAllocator::Copier : public BlockCopier {
 public:
  Copier(FakeDeviceAllocator* owner, std::byte* shadow, const BlockLayout& layout,
         int32_t num_blocks)
      : BlockCopier(layout, num_blocks), owner_(owner), shadow_(shadow) {}

  MemoryKind memory_kind() const override { return MemoryKind::kDevice; }

 protected:
  absl::Status DoCopyOut(absl::Span<const BlockSpan> spans, absl::Span<std::byte> host) override {
    std::byte* out = host.data();
    for (const BlockSpan& s : spans) {
      std::memcpy(out, At(s), s.length);
      out += s.length;
    }
    owner_->copy_out_calls_.fetch_add(1);
    owner_->bytes_out_.fetch_add(static_cast<int64_t>(host.size()));
    return absl::OkStatus();
  }

  absl::Status DoCopyIn(absl::Span<const std::byte> host,
                        absl::Span<const BlockSpan> spans) override {
    const std::byte* in = host.data();
    for (const BlockSpan& s : spans) {
      std::memcpy(At(s), in, s.length);
      in += s.length;
    }
    owner_->copy_in_calls_.fetch_add(1);
    owner_->bytes_in_.fetch_add(static_cast<int64_t>(host.size()));
    return absl::OkStatus();
  }

 private:
  std::byte* At(const BlockSpan& s) const {
    return shadow_ + static_cast<size_t>(s.block.value()) * block_bytes() + s.offset;
  }

  FakeDeviceAllocator* const owner_;
  std::byte* const shadow_;
};

FakeDeviceAllocator::~FakeDeviceAllocator() {
  absl::MutexLock lock(&mu_);
  LOCKSTEP_CHECK(regions_.empty()) << regions_.size() << " fake device allocations not freed";
}

absl::StatusOr<std::byte*> FakeDeviceAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("KV block storage of 0 bytes requested");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t rounded = (bytes + page - 1) / page * page;
  void* reserved = mmap(nullptr, rounded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
  if (reserved == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve ", rounded, " bytes of fake device address space"));
  }
  Region region;
  region.bytes = rounded;
  region.shadow = std::make_unique<std::byte[]>(rounded);  // value-initialized: zeros
  auto* base = static_cast<std::byte*>(reserved);
  absl::MutexLock lock(&mu_);
  regions_.emplace(base, std::move(region));
  return base;
}

void FakeDeviceAllocator::Free(std::byte* p, size_t /*bytes*/) {
  absl::MutexLock lock(&mu_);
  const auto it = regions_.find(p);
  LOCKSTEP_CHECK(it != regions_.end()) << "freeing fake device memory that was not allocated";
  munmap(p, it->second.bytes);
  regions_.erase(it);
}

absl::StatusOr<std::unique_ptr<BlockCopier>> FakeDeviceAllocator::MakeCopier(
    std::byte* base, const BlockLayout& layout, int32_t num_blocks) {
  absl::MutexLock lock(&mu_);
  const auto it = regions_.find(base);
  if (it == regions_.end()) {
    return absl::InvalidArgumentError("a copier over memory this allocator did not hand out");
  }
  if (static_cast<size_t>(num_blocks) * layout.BlockBytes() > it->second.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(num_blocks, " blocks of ", layout.BlockBytes(), " bytes overrun a region of ",
                     it->second.bytes));
  }
  return std::make_unique<Copier>(this, it->second.shadow.get(), layout, num_blocks);
}

}  // namespace lockstep::kv::testing
