// Disaggregated KV transfer, as the executor sees it (docs/design.md §2, §4, §7.8).
//
// Context side: when a context-only request finishes its prefill, the executor keeps
// its caches alive under a *transfer claim* and calls StartSend; the generation rank
// that owns the request pulls the blocks. The claim ends when the pull completes,
// fails, or the lease expires; only then does the executor release the caches (once).
//
// Generation side: a generation-only request arrives with the address of its context
// rank; once the scheduler has allocated its blocks, the executor calls StartReceive,
// and the transceiver writes the pulled blocks straight into them.
//
// Nothing here blocks: progress is reported by Poll, which the executor calls once per
// step (rank-locally, before intake), and each result is handled on its own rank: a send
// event ends its claim; a failed receive fails its request, whose final response goes
// out at the step's response gather and which is counted in the next vote's
// `StepVote::errors` (and `StepStats::errors`). No rank waits on another's transfers.
//
// Thread safety: all methods are called from the executor thread; implementations do
// their network work on threads of their own.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_TRANSCEIVER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_TRANSCEIVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "kvcache/host_blocks.h"
#include "kvcache/kv_types.h"

namespace lockstep::transfer {

// Where a context request's KV lives: enough for a generation rank to pull it.
struct ContextHandle {
  std::string instance;     // context instance name
  int32_t rank = 0;         // context rank holding the blocks
  std::string address;      // host:port of that rank's KV transfer service
  RequestId request_id;     // the request id on the context instance
  absl::Time lease_expiry;  // the claim expires at this time (context clock)
};

// `blocks`: the request's caches in the local pools (KvManager::BlockRefsOf).
struct SendSpec {
  kv::BlockRefs blocks;
  int64_t num_tokens = 0;   // tokens whose KV moves (the prompt length)
  absl::Time lease_expiry;  // release the claim at this time if nobody pulled
  // Target blocks read from pinned host KV tier copies instead of the pool
  // (KvManager::PinHostBlocks; claim_blocks.h); null: every block from the pool.
  std::shared_ptr<const kv::HostBlocks> host_blocks;
};

struct ReceiveSpec {
  kv::BlockRefs blocks;
  int64_t num_tokens = 0;  // tokens whose KV moves (the prompt length)
  ContextHandle source;
  absl::Time deadline;  // fail the receive if it has not completed by then
};

enum class TransferKind { kSend, kReceive };

// A transfer that ended: completed (OK), failed (with the reason), cancelled
// (kCancelled) or expired (kDeadlineExceeded).
struct TransferEvent {
  TransferKind kind = TransferKind::kSend;
  RequestId id;
  uint64_t generation = 0;
  absl::Status status;
};

class Transceiver {
 public:
  virtual ~Transceiver() = default;

  // Context side: offer `spec.blocks` to the generation rank that will pull them.
  virtual absl::Status StartSend(const SendSpec& spec) = 0;

  // Generation side: start pulling the context KV into `spec.blocks`.
  virtual absl::Status StartReceive(const ReceiveSpec& spec) = 0;

  // Transfers that ended since the last call, in the order they ended.
  virtual std::vector<TransferEvent> Poll() = 0;

  // Abandons the transfer of `id` (either kind); an event with kCancelled follows
  // unless the transfer already ended. The blocks are no longer touched once that
  // event is polled.
  virtual void Cancel(RequestId id) = 0;

  // Transfers started and not yet reported by Poll.
  virtual int64_t InFlight() const = 0;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_TRANSCEIVER_H_
