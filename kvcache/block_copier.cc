#include "kvcache/block_copier.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kvcache/stream_copy.h"

namespace lockstep::kv {

BlockCopier::BlockCopier(const BlockLayout& layout, int32_t num_blocks)
    : layout_(layout), num_blocks_(num_blocks) {}

absl::Status BlockCopier::CheckSpans(absl::Span<const BlockSpan> spans, size_t host_bytes) const {
  const size_t block_bytes = layout_.BlockBytes();
  size_t total = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const BlockSpan& s = spans[i];
    if (s.block.value() < 0 || s.block.value() >= num_blocks_) {
      return absl::InvalidArgumentError(absl::StrCat("span ", i, " names block ", s.block.value(),
                                                     " of a pool of ", num_blocks_, " blocks"));
    }
    if (s.offset > block_bytes || s.length > block_bytes - s.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("span ", i, " (", s.length, " bytes at byte ", s.offset, " of block ",
                       s.block.value(), ") runs past the block's ", block_bytes, " bytes"));
    }
    total += s.length;
  }
  if (total != host_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the spans hold ", total, " bytes but the host buffer has ", host_bytes));
  }
  return absl::OkStatus();
}

absl::Status BlockCopier::CopyOut(absl::Span<const BlockSpan> spans, absl::Span<std::byte> host) {
  if (absl::Status s = CheckSpans(spans, host.size()); !s.ok()) return s;
  return DoCopyOut(spans, host);
}

absl::Status BlockCopier::CopyIn(absl::Span<const std::byte> host,
                                 absl::Span<const BlockSpan> spans) {
  if (absl::Status s = CheckSpans(spans, host.size()); !s.ok()) return s;
  return DoCopyIn(host, spans);
}

absl::Status BlockCopier::CopyInCached(absl::Span<const std::byte> host,
                                       absl::Span<const BlockSpan> spans) {
  if (absl::Status s = CheckSpans(spans, host.size()); !s.ok()) return s;
  return DoCopyInCached(host, spans);
}

absl::Status BlockCopier::CopyBlocksInCached(absl::Span<const BlockSource> sources) {
  for (size_t i = 0; i < sources.size(); ++i) {
    const int32_t block = sources[i].block.value();
    if (block < 0 || block >= num_blocks_) {
      return absl::InvalidArgumentError(absl::StrCat("source ", i, " names block ", block,
                                                     " of a pool of ", num_blocks_, " blocks"));
    }
  }
  return DoCopyBlocksInCached(sources);
}

absl::Status BlockCopier::DoCopyBlocksInCached(absl::Span<const BlockSource> sources) {
  const size_t per_block = block_bytes();
  for (const BlockSource& s : sources) {
    const BlockSpan span{s.block, 0, per_block};
    if (absl::Status status = DoCopyInCached({s.data, per_block}, {&span, 1}); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

HostBlockCopier::HostBlockCopier(std::byte* base, const BlockLayout& layout, int32_t num_blocks)
    : BlockCopier(layout, num_blocks), base_(base) {}

absl::Status HostBlockCopier::DoCopyOut(absl::Span<const BlockSpan> spans,
                                        absl::Span<std::byte> host) {
  const size_t per_block = block_bytes();
  std::byte* out = host.data();
  for (const BlockSpan& s : spans) {
    if (s.length == 0) continue;
    std::memcpy(out, base_ + static_cast<size_t>(s.block.value()) * per_block + s.offset, s.length);
    out += s.length;
  }
  return absl::OkStatus();
}

absl::Status HostBlockCopier::DoCopyIn(absl::Span<const std::byte> host,
                                       absl::Span<const BlockSpan> spans) {
  const size_t per_block = block_bytes();
  const std::byte* in = host.data();
  for (const BlockSpan& s : spans) {
    if (s.length == 0) continue;
    StreamCopy(base_ + static_cast<size_t>(s.block.value()) * per_block + s.offset, in, s.length);
    in += s.length;
  }
  StreamCopyFence();  // the blocks are complete for whoever reads them next
  return absl::OkStatus();
}

absl::Status HostBlockCopier::DoCopyBlocksInCached(absl::Span<const BlockSource> sources) {
  const size_t per_block = block_bytes();
  for (const BlockSource& s : sources) {
    std::memcpy(base_ + static_cast<size_t>(s.block.value()) * per_block, s.data, per_block);
  }
  return absl::OkStatus();
}

absl::Status HostBlockCopier::DoCopyInCached(absl::Span<const std::byte> host,
                                             absl::Span<const BlockSpan> spans) {
  const size_t per_block = block_bytes();
  const std::byte* in = host.data();
  for (const BlockSpan& s : spans) {
    if (s.length == 0) continue;
    std::memcpy(base_ + static_cast<size_t>(s.block.value()) * per_block + s.offset, in, s.length);
    in += s.length;
  }
  return absl::OkStatus();
}

}  // namespace lockstep::kv
