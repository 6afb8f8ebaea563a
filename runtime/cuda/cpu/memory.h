// Device and pinned host memory of the CPU execution layer. Each allocation is its
// own mapping: it starts 256-byte aligned and ends at an inaccessible guard page (an
// overrun past the 256-byte-rounded size faults at once), fresh memory up to 64 MiB
// reads as 0xFF bytes (NaN in every float format; a private copy-on-write mapping of a
// file of them, so pages never touched cost nothing), and freed memory stays
// inaccessible in a quarantine for a while (a late use faults). Device memory counts
// against the device's cap (LOCKSTEP_CUDA_CPU_MEMORY).
//
// Thread safety: every function may be called from any thread.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_MEMORY_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_MEMORY_H_

#include <cstddef>

#include "driver_types.h"

namespace lockstep::cuda_cpu::internal {

// Fresh memory at most this large is poisoned with 0xFF.
inline constexpr size_t kPoisonLimit = size_t{64} << 20;

// Allocates `bytes` of device memory on `device` (device) or pinned host memory.
cudaError_t Allocate(size_t bytes, bool device, int ordinal, void** out);

// Frees an allocation made by Allocate with the same `device`; cudaErrorInvalidValue
// for a pointer that is not the start of one.
cudaError_t Release(void* base, bool device);

// Bytes of device memory live on `device`.
size_t DeviceBytesInUse(int device);

// Replaces the whole pages inside [p, p + bytes) with fresh anonymous ones, so they read
// as 0 (a fill with 0 of a large range without touching it).
void ZeroPages(void* p, size_t bytes);

}  // namespace lockstep::cuda_cpu::internal

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_MEMORY_H_
