// Single-copy reads of a peer rank's buffers for ShmCommunicator: a rank of the same
// process is read with memcpy, a rank in another process with process_vm_readv
// (cross-memory attach: the kernel copies straight from the peer's pages, no staging
// through the segment). Needs the same uid and no seccomp or Yama rule against it;
// ShmGroup probes every peer at join time and the group falls back to staged copies
// unless every rank can read every peer.
//
// Thread safety: thread-safe (no state).
#ifndef LOCKSTEP_RUNTIME_COMM_SHM_DIRECT_H_
#define LOCKSTEP_RUNTIME_COMM_SHM_DIRECT_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace lockstep::comm::internal {

// Copies `n` bytes at `address` in process `pid` to `dst`. Unavailable if the
// process is gone (it may be exiting: its memory goes before its pidfd signals).
absl::Status ReadPeerMemory(pid_t pid, uint64_t address, char* dst, size_t n);

// Whether the 8 bytes at `address` in process `pid` can be read and equal `expected`.
bool CanReadPeerMemory(pid_t pid, uint64_t address, uint64_t expected);

}  // namespace lockstep::comm::internal

#endif  // LOCKSTEP_RUNTIME_COMM_SHM_DIRECT_H_
