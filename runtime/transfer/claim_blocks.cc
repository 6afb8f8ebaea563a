#include "runtime/transfer/claim_blocks.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace lockstep::transfer {

absl::Status CopyOutClaimBlocks(kv::BlockCopier& copier, const kv::HostBlocks* host,
                                int64_t first_index, absl::Span<const kv::BlockSpan> spans,
                                absl::Span<std::byte> out) {
  if (host == nullptr || host->count() == 0) return copier.CopyOut(spans, out);
  size_t total = 0;
  for (const kv::BlockSpan& s : spans) total += s.length;
  if (total != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("claim blocks: spans of ", total, " bytes into a buffer of ", out.size()));
  }
  size_t at = 0;       // in `out`
  size_t k = 0;        // span
  int64_t served = 0;  // bytes from host copies
  while (k < spans.size()) {
    if (const std::vector<std::byte>* bytes = host->Find(first_index + static_cast<int64_t>(k))) {
      const kv::BlockSpan& s = spans[k];
      if (s.offset + s.length > bytes->size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "claim blocks: span [", s.offset, ", ", s.offset + s.length, ") of block table entry ",
            first_index + static_cast<int64_t>(k), " runs past its ", bytes->size(), " bytes"));
      }
      std::memcpy(out.data() + at, bytes->data() + s.offset, s.length);
      at += s.length;
      served += static_cast<int64_t>(s.length);
      ++k;
      continue;
    }
    // A run of spans read from the device.
    size_t end = k;
    size_t length = 0;
    while (end < spans.size() && host->Find(first_index + static_cast<int64_t>(end)) == nullptr) {
      length += spans[end].length;
      ++end;
    }
    if (absl::Status s = copier.CopyOut(spans.subspan(k, end - k), out.subspan(at, length));
        !s.ok()) {
      return s;
    }
    at += length;
    k = end;
  }
  host->bytes_read.fetch_add(served, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace lockstep::transfer
