// Host buffers for chunks on their way out of the context rank (kv_transfer_server.h):
// a chunk's bytes are copied out of the blocks (BlockCopier::CopyOut) into a buffer
// that the sink may keep referencing after Write returns (gRPC holds its slices until
// they are sent), so each chunk takes its own buffer, and a buffer goes back for reuse
// when its last reference lets go (from whichever thread that is).
//
// Thread safety: thread-safe. Buffers may outlive the SendBuffers that made them.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_SEND_BUFFERS_H_
#define LOCKSTEP_RUNTIME_TRANSFER_SEND_BUFFERS_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace lockstep::transfer {

class SendBuffers {
 public:
  // Keeps at most `max_idle` returned buffers for reuse; frees the rest.
  explicit SendBuffers(size_t max_idle = 16);

  // A buffer of `bytes` bytes (contents unspecified), referenced by the returned
  // pointer; it returns to the pool when the last copy of that pointer is destroyed.
  std::shared_ptr<absl::Span<std::byte>> Take(size_t bytes);

  // Buffers returned and waiting for reuse.
  size_t idle() const;

 private:
  struct Shared {
    explicit Shared(size_t max_idle) : max_idle(max_idle) {}
    const size_t max_idle;
    mutable absl::Mutex mu;
    std::vector<std::vector<std::byte>> idle ABSL_GUARDED_BY(mu);
  };
  const std::shared_ptr<Shared> shared_;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_SEND_BUFFERS_H_
