// The point-to-point engine every NCCL operation of the CPU execution layer runs on:
// the sends and receives of one operation, progressed together over the rings of the
// communicator's segment (segment.h), so that no pairwise exchange can deadlock.
//
// Each message is one or more chunks (at least one, so an empty message is still
// matched); each chunk carries the sender's call (ChunkHeader), which the receiver
// checks against the call it is in: a mismatch is InvalidArgument naming both calls.
// Messages on one ordered pair are matched in order (per-pair sequence numbers).
//
// Thread safety: RunTransfers runs on the operation's thread with comm.op_mu held.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_TRANSFER_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_TRANSFER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/cuda/cpu/nccl/comm.h"

namespace lockstep::cuda_cpu::nccl {

enum class Call : uint32_t {
  kSendRecv = 1,  // ncclSend on the sender, ncclRecv on the receiver
  kAllReduce = 2,
  kAllGather = 3,
  kReduceScatter = 4,
  kBroadcast = 5,
};

// One call as both ranks describe it: which call, its count and type, its root (or,
// for send/recv, the rank it names) and reduction.
struct CallInfo {
  Call call = Call::kSendRecv;
  int type = 0;
  uint64_t count = 0;
  int root = -1;
  int redop = -1;
};

// "ncclAllReduce(4 x float32, sum)", "ncclSend(8 x uint8 to rank 2)".
std::string DescribeCall(const CallInfo& info, bool sender);

struct Transfer {
  int peer = 0;
  bool send = false;
  char* data = nullptr;  // read (send) or written (receive) as the transfer runs
  size_t bytes = 0;
  CallInfo info;
};

// Runs every transfer to completion. OK; Cancelled once comm.aborted; InvalidArgument
// for a mismatched call; Unavailable when a peer it waits for left, aborted, failed or
// exited. With `kill_after_first_chunk` (injected fault kill@N) the process SIGKILLs
// itself once the first chunk is written.
absl::Status RunTransfers(CommState& comm, uint64_t ordinal, std::vector<Transfer>& transfers,
                          bool kill_after_first_chunk);

}  // namespace lockstep::cuda_cpu::nccl

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_TRANSFER_H_
