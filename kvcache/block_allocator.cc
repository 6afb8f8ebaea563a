#include "kvcache/block_allocator.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::kv {

absl::StatusOr<std::byte*> HostAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("KV block storage of 0 bytes requested");
  if (bytes > std::numeric_limits<size_t>::max() - kAlignment) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV block storage of ", bytes, " bytes overflows size_t"));
  }
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", rounded, " bytes of host memory for KV blocks"));
  }
  std::memset(p, 0, rounded);
  return static_cast<std::byte*>(p);
}

void HostAllocator::Free(std::byte* p, size_t /*bytes*/) { std::free(p); }

absl::StatusOr<std::unique_ptr<BlockCopier>> HostAllocator::MakeCopier(std::byte* base,
                                                                       const BlockLayout& layout,
                                                                       int32_t num_blocks) {
  if (base == nullptr) return absl::InvalidArgumentError("a copier over a null slab");
  return std::make_unique<HostBlockCopier>(base, layout, num_blocks);
}

}  // namespace lockstep::kv
