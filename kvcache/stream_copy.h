// Copies into KV blocks (HostBlockCopier::CopyIn) with non-temporal (streaming) stores where the CPU has AVX2:
// received KV is not read again by the receiving thread, so the stores bypass the
// caches instead of first reading every destination line (about 1.5x the speed of
// memcpy into blocks that are not cached). Small copies and other CPUs use memcpy.
//
// Streaming stores are weakly ordered: call StreamCopyFence before another thread may
// read the destination (before the transfer's event is published).
//
// Thread safety: thread-safe (pure functions).
#ifndef LOCKSTEP_KVCACHE_STREAM_COPY_H_
#define LOCKSTEP_KVCACHE_STREAM_COPY_H_

#include <cstddef>

namespace lockstep::kv {

// memcpy(dst, src, n) semantics (no overlap), possibly with streaming stores.
void StreamCopy(void* dst, const void* src, size_t n);

// Orders the streaming stores made so far before later stores of this thread.
void StreamCopyFence();

// Whether StreamCopy uses streaming stores on this CPU.
bool StreamCopyIsAccelerated();

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_STREAM_COPY_H_
