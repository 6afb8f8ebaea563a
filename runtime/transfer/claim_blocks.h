// How a transfer claim's blocks are read on the context rank: each chunk's byte ranges
// come through the pool's copier (kvcache/block_copier.h), except the target blocks the
// claim reads from the host KV tier (SendSpec::host_blocks, kvcache/host_blocks.h:
// pinned host copies of the same KV, kvcache/tier_pins.h has the rule), which are
// copied from host memory. Every data plane (gRPC, TCP, UCX staging) fills its send
// buffers through here (KvTransferServer::Stream).
//
// Thread safety: thread-safe (the copier is; the host copies are immutable while the
// claim lives; the read counter is atomic).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_CLAIM_BLOCKS_H_
#define LOCKSTEP_RUNTIME_TRANSFER_CLAIM_BLOCKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kvcache/block_copier.h"
#include "kvcache/host_blocks.h"

namespace lockstep::transfer {

// Copies `spans` front to back into `out` (their total length). The spans are of
// consecutive block-table entries starting at `first_index` (span k is entry
// first_index + k), as a chunk's are. A span whose entry `host` names (host may be
// null: none) is copied from that host copy and counted in host->bytes_read; runs of
// the others go through `copier.CopyOut`, one call per run. InvalidArgument when the
// lengths disagree or a span runs past its block; the copier's errors otherwise.
absl::Status CopyOutClaimBlocks(kv::BlockCopier& copier, const kv::HostBlocks* host,
                                int64_t first_index, absl::Span<const kv::BlockSpan> spans,
                                absl::Span<std::byte> out);

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_CLAIM_BLOCKS_H_
