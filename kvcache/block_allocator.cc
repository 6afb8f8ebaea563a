#include "kvcache/block_allocator.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::kv {

absl::StatusOr<float*> HostAllocator::Allocate(size_t num_floats) {
  if (num_floats == 0) {
    return absl::InvalidArgumentError("KV block storage of 0 floats requested");
  }
  if (num_floats > (std::numeric_limits<size_t>::max() - kAlignment) / sizeof(float)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV block storage of ", num_floats, " floats overflows size_t"));
  }
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t bytes = (num_floats * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of host memory for KV blocks"));
  }
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}

void HostAllocator::Free(float* p, size_t /*num_floats*/) { std::free(p); }

}  // namespace lockstep::kv
