// The NCCL operations of the CPU execution layer as stream work: a collective, or the
// sends and receives of one ncclGroupStart/ncclGroupEnd on one communicator, becomes
// one Op, enqueued on its stream through lockstep::cuda_cpu::Enqueue (stream_ops.h).
// An Op keeps pointers, not data: it reads and writes the buffers when it runs (at
// every replay of a graph it was captured into).
//
// Running: operations of a communicator run one at a time (op_mu) and are numbered
// (the ordinal in messages and in faults.h's error@N and kill@N). Each becomes
// transfers (transfer.h) plus local work: self-sends are copies matched with
// self-receives in order; all-reduce and reduce-scatter receive every rank's block and
// reduce in rank order. After an error the op fails the communicator and stays
// incomplete until abort (comm.h); after an abort it does nothing.
//
// Thread safety: an Op runs on the thread its stream runs work on.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_OPS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_OPS_H_

#include <nccl.h>

#include <memory>
#include <vector>

#include "runtime/cuda/cpu/nccl/comm.h"
#include "runtime/cuda/cpu/nccl/transfer.h"

namespace lockstep::cuda_cpu::nccl {

// One call as the host made it (arguments already validated).
struct Item {
  Call call = Call::kSendRecv;
  bool recv = false;  // kSendRecv: ncclRecv (else ncclSend)
  const void* send = nullptr;
  void* out = nullptr;
  size_t count = 0;  // the call's count argument
  ncclDataType_t type = ncclUint8;
  ncclRedOp_t redop = ncclSum;
  int root = -1;  // kBroadcast: root; kSendRecv: peer
};

// Runs `items` as one operation of `comm` (the file comment). Always cudaSuccess: NCCL
// failures are the communicator's async error, not the device's.
cudaError_t RunOp(const std::shared_ptr<CommState>& comm, const std::vector<Item>& items);

// "ncclAllReduce", or "ncclGroup(3 calls)" for several: the op's name on its stream.
const char* OpName(const std::vector<Item>& items);

}  // namespace lockstep::cuda_cpu::nccl

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_OPS_H_
