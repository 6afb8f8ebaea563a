// BlockCopier: the one way to read and write the bytes of a pool's blocks from outside
// the engine. A copier serves one pool (one contiguous slab from a BlockAllocator,
// block b at byte b * layout.BlockBytes(), block_layout.h); it gathers byte ranges of
// blocks into a contiguous host buffer (CopyOut) and scatters a host buffer into them
// (CopyIn). KV transfer goes through it, so it works unchanged whether the slab is host
// or device memory: it never sees the slab's address.
//
// Implementations: HostBlockCopier (memcpy, below) for host slabs; a device copier
// (gather/scatter through a pinned bounce buffer) for device slabs, built from the slab
// base, the layout and the block count only. The matching copier for a slab comes from
// the allocator that made it (BlockAllocator::MakeCopier).
//
// Ownership: a copier does not own the slab; the slab must outlive it (KvManager owns
// both and destroys the copier first). `host` buffers belong to the caller and are
// only used during the call.
//
// Thread safety: CopyOut and CopyIn may be called from several threads at once (the
// transfer server sends several pulls at a time while others land). Implementations may
// serialize calls internally. The caller orders copies against the engine's use of the
// same blocks (model_engine.h, transceiver.h); concurrent CopyIn calls write disjoint
// blocks.
#ifndef LOCKSTEP_KVCACHE_BLOCK_COPIER_H_
#define LOCKSTEP_KVCACHE_BLOCK_COPIER_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/block_layout.h"
#include "kvcache/memory_kind.h"

namespace lockstep::kv {

// A byte range of one block: bytes [offset, offset + length) of block `block`.
struct BlockSpan {
  BlockId block;
  size_t offset = 0;
  size_t length = 0;

  friend bool operator==(const BlockSpan&, const BlockSpan&) = default;
};

// One whole block's bytes at `data` (block_bytes() of them, the caller's) and the pool
// block they go to (BlockCopier::CopyBlocksInCached).
struct BlockSource {
  const std::byte* data = nullptr;
  BlockId block;
};

class BlockCopier {
 public:
  virtual ~BlockCopier() = default;
  BlockCopier(const BlockCopier&) = delete;
  BlockCopier& operator=(const BlockCopier&) = delete;

  const BlockLayout& layout() const { return layout_; }
  int32_t num_blocks() const { return num_blocks_; }
  size_t block_bytes() const { return layout_.BlockBytes(); }
  virtual MemoryKind memory_kind() const = 0;

  // Copies the bytes of `spans`, in order, back to back into `host`. InvalidArgument
  // when a span names a block outside the pool or runs past its block's end, or when
  // host.size() differs from the spans' total length; nothing is copied then. Other
  // errors come from the memory system (e.g. Internal for a failed device copy).
  absl::Status CopyOut(absl::Span<const BlockSpan> spans, absl::Span<std::byte> host);

  // Copies `host`, front to back, into `spans` in order; the same checks as CopyOut.
  absl::Status CopyIn(absl::Span<const std::byte> host, absl::Span<const BlockSpan> spans);
  // CopyIn of KV this process reads again at once (a prefix brought back from a KV tier
  // for the next prefill): a host slab's copier writes through the caches rather than
  // streaming past them; other copiers copy as CopyIn does. The same checks.
  absl::Status CopyInCached(absl::Span<const std::byte> host, absl::Span<const BlockSpan> spans);
  // CopyInCached of whole blocks from separate buffers, in order: one call for an
  // onboard's blocks. InvalidArgument when a block is outside the pool; nothing is
  // copied then.
  absl::Status CopyBlocksInCached(absl::Span<const BlockSource> sources);

 protected:
  BlockCopier(const BlockLayout& layout, int32_t num_blocks);

  // The copies themselves, called only with checked spans and a host buffer of
  // exactly their total length.
  virtual absl::Status DoCopyOut(absl::Span<const BlockSpan> spans, absl::Span<std::byte> host) = 0;
  virtual absl::Status DoCopyIn(absl::Span<const std::byte> host,
                                absl::Span<const BlockSpan> spans) = 0;
  virtual absl::Status DoCopyInCached(absl::Span<const std::byte> host,
                                      absl::Span<const BlockSpan> spans) {
    return DoCopyIn(host, spans);
  }
  // Called only with blocks inside the pool; by default one DoCopyInCached a block.
  virtual absl::Status DoCopyBlocksInCached(absl::Span<const BlockSource> sources);

 private:
  absl::Status CheckSpans(absl::Span<const BlockSpan> spans, size_t host_bytes) const;

  const BlockLayout layout_;
  const int32_t num_blocks_;
};

// Host slabs: memcpy out; in, streaming stores (stream_copy.h) fenced before CopyIn
// returns, or memcpy (CopyInCached). Stateless after construction, so calls may run
// concurrently.
class HostBlockCopier : public BlockCopier {
 public:
  // `base` is the slab of `num_blocks` blocks of `layout`, host memory.
  HostBlockCopier(std::byte* base, const BlockLayout& layout, int32_t num_blocks);

  MemoryKind memory_kind() const override { return MemoryKind::kHost; }

 protected:
  absl::Status DoCopyOut(absl::Span<const BlockSpan> spans, absl::Span<std::byte> host) override;
  absl::Status DoCopyIn(absl::Span<const std::byte> host,
                        absl::Span<const BlockSpan> spans) override;
  absl::Status DoCopyInCached(absl::Span<const std::byte> host,
                              absl::Span<const BlockSpan> spans) override;
  absl::Status DoCopyBlocksInCached(absl::Span<const BlockSource> sources) override;

 private:
  std::byte* const base_;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_BLOCK_COPIER_H_
