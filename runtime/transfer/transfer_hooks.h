// Test hooks of the gRPC transceiver: let a test slow a serving thread down, corrupt a
// chunk on the wire, or hold a receiving thread between chunks. Empty in production.
//
// Thread safety: the hooks run on transfer threads; they must be thread-safe, and a
// hook that blocks must bound its wait.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_TRANSFER_HOOKS_H_
#define LOCKSTEP_RUNTIME_TRANSFER_TRANSFER_HOOKS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/synchronization/notification.h"
#include "common/ids.h"
#include "runtime/transfer/chunk_codec.h"

namespace lockstep::transfer {

struct SendChunkInfo {
  RequestId id;       // the context request
  int64_t index = 0;  // of the chunk within the pull, over both pools
  ChunkHeader header;
};

struct TransferHooks {
  // Context side, on the serving thread, before a chunk is written, after its
  // checksums were computed. `payload` is a private copy of the chunk's payload that is
  // sent instead (the hook may change it). `abort` is notified when the pull must stop
  // (claim cancelled or expired, rank shutting down).
  std::function<void(const SendChunkInfo& chunk, std::string* payload,
                     const absl::Notification& abort)>
      before_send_chunk;
  // Generation side, on the receiving thread, after the blocks of a chunk were written
  // (`index` counts the chunks of this receive).
  std::function<void(RequestId id, int64_t index)> after_receive_chunk;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_TRANSFER_HOOKS_H_
