// The C entry points of include/nccl.h: argument checks (synchronous errors, as
// NCCL's), groups, and the hand-off of each operation to its stream (ops.h).
#include <nccl.h>
#include <sys/random.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/cuda/cpu/nccl/comm.h"
#include "runtime/cuda/cpu/nccl/faults.h"
#include "runtime/cuda/cpu/nccl/ops.h"
#include "runtime/cuda/cpu/nccl/reduce.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace {

using lockstep::cuda_cpu::nccl::Call;
using lockstep::cuda_cpu::nccl::CommState;
using lockstep::cuda_cpu::nccl::Item;

constexpr absl::Duration kDefaultBootstrapTimeout = absl::Seconds(300);
constexpr unsigned int kConfigMagic = 0xcafebeef;

thread_local std::string tls_last_error;  // errors without a communicator
thread_local std::string tls_returned;    // what ncclGetLastError last returned

struct PendingOp {
  ncclComm_t comm;
  cudaStream_t stream;
  std::vector<Item> items;
};
thread_local int group_depth = 0;
thread_local std::vector<PendingOp> group_ops;
thread_local ncclResult_t group_error = ncclSuccess;

// A synchronous error: recorded as the communicator's (or the thread's) last error.
ncclResult_t Refuse(ncclResult_t code, ncclComm_t comm, const std::string& message) {
  std::fprintf(stderr, "NCCL WARN %s\n", message.c_str());
  // A refused call inside a group fails the group (ncclGroupEnd returns the error).
  if (group_depth > 0 && group_error == ncclSuccess) group_error = code;
  if (comm != nullptr) {
    comm->state->set_last_error(message);
  } else {
    tls_last_error = message;
  }
  return code;
}

absl::Duration BootstrapTimeout() {
  const char* env = std::getenv(lockstep::cuda_cpu::nccl::kBootstrapTimeoutEnv);
  double seconds = 0;
  if (env != nullptr && absl::SimpleAtod(env, &seconds) && seconds > 0) {
    return absl::Seconds(seconds);
  }
  return kDefaultBootstrapTimeout;
}

// A communicator that can take operations: ncclSuccess, or the error to return.
ncclResult_t Usable(ncclComm_t comm, const char* call) {
  if (comm == nullptr)
    return Refuse(ncclInvalidArgument, nullptr, absl::StrCat(call, ": comm is NULL"));
  const int state = comm->state->async.load(std::memory_order_acquire);
  if (state == ncclInProgress) {
    return Refuse(ncclInvalidUsage, comm,
                  absl::StrCat(call, " on ", comm->state->Where(), " before its init completed"));
  }
  if (comm->state->aborted.load()) {
    return Refuse(ncclInvalidUsage, comm, absl::StrCat(call, " on an aborted communicator"));
  }
  return static_cast<ncclResult_t>(state);
}

ncclResult_t Enqueue(ncclComm_t comm, cudaStream_t stream, std::vector<Item> items) {
  std::shared_ptr<CommState> state = comm->state;
  const char* name = lockstep::cuda_cpu::nccl::OpName(items);
  const cudaError_t error = lockstep::cuda_cpu::Enqueue(
      stream, name,
      [state, items = std::move(items)] { return lockstep::cuda_cpu::nccl::RunOp(state, items); });
  if (error != cudaSuccess) {
    return Refuse(ncclUnhandledCudaError, comm,
                  absl::StrCat(name, ": enqueueing on the stream failed with CUDA error ",
                               static_cast<int>(error)));
  }
  return ncclSuccess;
}

// Runs `item` now (outside a group) or adds it to the thread's group.
ncclResult_t Submit(ncclComm_t comm, cudaStream_t stream, const Item& item) {
  if (group_depth == 0) return Enqueue(comm, stream, {item});
  for (PendingOp& op : group_ops) {
    if (op.comm != comm) continue;
    if (op.stream != stream) {
      return Refuse(ncclInvalidUsage, comm,
                    "calls of one communicator in one group use two streams "
                    "(this layer needs one stream per communicator and group)");
    }
    op.items.push_back(item);
    return ncclSuccess;
  }
  group_ops.push_back({comm, stream, {item}});
  return ncclSuccess;
}

// Checks the arguments every call has; `count` elements of `type` per rank block,
// `blocks` blocks in the largest buffer.
ncclResult_t CheckCall(const char* call, ncclComm_t comm, size_t count, ncclDataType_t type,
                       size_t blocks, bool reduce, ncclRedOp_t op, const void* a, const void* b) {
  if (ncclResult_t r = Usable(comm, call); r != ncclSuccess) return r;
  const size_t size = lockstep::cuda_cpu::nccl::TypeBytes(type);
  if (size == 0) {
    return Refuse(ncclInvalidArgument, comm,
                  absl::StrCat(call, ": invalid datatype ", static_cast<int>(type)));
  }
  if (reduce && !lockstep::cuda_cpu::nccl::Reducible(type)) {
    return Refuse(ncclInvalidArgument, comm,
                  absl::StrCat(call, ": ", lockstep::cuda_cpu::nccl::TypeName(type),
                               " cannot be reduced by this layer"));
  }
  if (reduce && !lockstep::cuda_cpu::nccl::ValidRedOp(op)) {
    return Refuse(ncclInvalidArgument, comm,
                  absl::StrCat(call, ": invalid reduction ", static_cast<int>(op)));
  }
  if (count > std::numeric_limits<size_t>::max() / size / blocks) {
    return Refuse(ncclInvalidArgument, comm, absl::StrCat(call, ": count ", count, " overflows"));
  }
  if (count > 0 && (a == nullptr || b == nullptr)) {
    return Refuse(ncclInvalidArgument, comm, absl::StrCat(call, ": a buffer is NULL"));
  }
  return ncclSuccess;
}

ncclResult_t CheckRank(const char* call, ncclComm_t comm, int rank, const char* what) {
  if (rank >= 0 && rank < comm->state->world) return ncclSuccess;
  return Refuse(
      ncclInvalidArgument, comm,
      absl::StrCat(call, ": ", what, " ", rank, " is not a rank of ", comm->state->Where()));
}

ncclResult_t InitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                      const ncclConfig_t* config) {
  constexpr const char* kCall = "ncclCommInitRank";
  if (out == nullptr)
    return Refuse(ncclInvalidArgument, nullptr, absl::StrCat(kCall, ": comm is NULL"));
  *out = nullptr;
  if (nranks < 1 || nranks > lockstep::cuda_cpu::nccl::kMaxRanks || rank < 0 || rank >= nranks) {
    return Refuse(ncclInvalidArgument, nullptr,
                  absl::StrCat(kCall, ": rank ", rank, " of ", nranks, " ranks (1 to ",
                               lockstep::cuda_cpu::nccl::kMaxRanks, " ranks supported)"));
  }
  lockstep::cuda_cpu::nccl::UniqueId unique;
  if (!DecodeUniqueId(id, &unique)) {
    return Refuse(ncclInvalidArgument, nullptr,
                  absl::StrCat(kCall, ": the id was not made by ncclGetUniqueId"));
  }
  if (config != nullptr && config->magic != kConfigMagic) {
    return Refuse(
        ncclInvalidArgument, nullptr,
        absl::StrCat(kCall, "Config: the config was not set from NCCL_CONFIG_INITIALIZER"));
  }
  const bool blocking = config == nullptr || config->blocking != 0;  // UNDEF is blocking
  std::string name = config != nullptr && config->commName != nullptr ? config->commName : "";
  absl::StatusOr<lockstep::cuda_cpu::nccl::Faults> faults =
      lockstep::cuda_cpu::nccl::FaultsFor(rank);
  if (!faults.ok()) {
    return Refuse(ncclInvalidArgument, nullptr, std::string(faults.status().message()));
  }
  auto state = std::make_shared<CommState>(rank, nranks, unique, std::move(name),
                                           lockstep::cuda_cpu::CurrentDevice(), *faults);
  const absl::Time deadline = absl::Now() + BootstrapTimeout();
  if (blocking) {
    state->Bootstrap(deadline);
    const int result = state->async.load();
    if (result != ncclSuccess) {
      tls_last_error = state->last_error();
      return static_cast<ncclResult_t>(result);
    }
    *out = new ncclComm{std::move(state)};
    return ncclSuccess;
  }
  *out = new ncclComm{state};
  state->StartBootstrap(deadline);
  return ncclInProgress;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return Refuse(ncclInvalidArgument, nullptr, "ncclGetVersion: NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return Refuse(ncclInvalidArgument, nullptr, "ncclGetUniqueId: NULL");
  lockstep::cuda_cpu::nccl::UniqueId id;
  if (getrandom(id.nonce, sizeof(id.nonce), 0) != static_cast<ssize_t>(sizeof(id.nonce))) {
    return Refuse(ncclSystemError, nullptr, "ncclGetUniqueId: getrandom failed");
  }
  lockstep::cuda_cpu::nccl::EncodeUniqueId(id, uniqueId);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return InitRank(comm, nranks, commId, rank, config);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return InitRank(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return Refuse(ncclInvalidArgument, nullptr, "ncclCommDestroy: comm is NULL");
  comm->state->Abort(/*destroy=*/true);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->state->Abort(/*destroy=*/false);
  delete comm;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  tls_returned = comm != nullptr ? comm->state->last_error() : tls_last_error;
  return tls_returned.c_str();
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) {
    return Refuse(ncclInvalidArgument, comm, "ncclCommGetAsyncError: NULL argument");
  }
  *asyncError = static_cast<ncclResult_t>(comm->state->async.load(std::memory_order_acquire));
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr)
    return Refuse(ncclInvalidArgument, comm, "ncclCommCount: NULL");
  *count = comm->state->world;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) {
    return Refuse(ncclInvalidArgument, comm, "ncclCommCuDevice: NULL");
  }
  *device = comm->state->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr)
    return Refuse(ncclInvalidArgument, comm, "ncclCommUserRank: NULL");
  *rank = comm->state->rank;
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (ncclResult_t r =
          CheckCall("ncclBroadcast", comm, count, datatype, 1, false, ncclSum, recvbuff, recvbuff);
      r != ncclSuccess) {
    return r;
  }
  if (ncclResult_t r = CheckRank("ncclBroadcast", comm, root, "root"); r != ncclSuccess) return r;
  if (count > 0 && comm->state->rank == root && sendbuff == nullptr) {
    return Refuse(ncclInvalidArgument, comm, "ncclBroadcast: the root's sendbuff is NULL");
  }
  if (count == 0) return ncclSuccess;
  Item item{Call::kBroadcast, false, sendbuff, recvbuff, count, datatype, ncclSum, root};
  return Submit(comm, stream, item);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  if (ncclResult_t r =
          CheckCall("ncclAllReduce", comm, count, datatype, 1, true, op, sendbuff, recvbuff);
      r != ncclSuccess) {
    return r;
  }
  if (count == 0) return ncclSuccess;
  return Submit(comm, stream,
                {Call::kAllReduce, false, sendbuff, recvbuff, count, datatype, op, -1});
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (ncclResult_t r =
          CheckCall("ncclReduceScatter", comm, recvcount, datatype,
                    comm != nullptr ? comm->state->world : 1, true, op, sendbuff, recvbuff);
      r != ncclSuccess) {
    return r;
  }
  if (recvcount == 0) return ncclSuccess;
  return Submit(comm, stream,
                {Call::kReduceScatter, false, sendbuff, recvbuff, recvcount, datatype, op, -1});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r =
          CheckCall("ncclAllGather", comm, sendcount, datatype,
                    comm != nullptr ? comm->state->world : 1, false, ncclSum, sendbuff, recvbuff);
      r != ncclSuccess) {
    return r;
  }
  if (sendcount == 0) return ncclSuccess;
  return Submit(comm, stream,
                {Call::kAllGather, false, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1});
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r =
          CheckCall("ncclSend", comm, count, datatype, 1, false, ncclSum, sendbuff, sendbuff);
      r != ncclSuccess) {
    return r;
  }
  if (ncclResult_t r = CheckRank("ncclSend", comm, peer, "peer"); r != ncclSuccess) return r;
  if (count == 0) return ncclSuccess;
  return Submit(comm, stream,
                {Call::kSendRecv, false, sendbuff, nullptr, count, datatype, ncclSum, peer});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t r =
          CheckCall("ncclRecv", comm, count, datatype, 1, false, ncclSum, recvbuff, recvbuff);
      r != ncclSuccess) {
    return r;
  }
  if (ncclResult_t r = CheckRank("ncclRecv", comm, peer, "peer"); r != ncclSuccess) return r;
  if (count == 0) return ncclSuccess;
  return Submit(comm, stream,
                {Call::kSendRecv, true, nullptr, recvbuff, count, datatype, ncclSum, peer});
}

ncclResult_t ncclGroupStart(void) {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0) {
    return Refuse(ncclInvalidUsage, nullptr, "ncclGroupEnd without ncclGroupStart");
  }
  if (--group_depth > 0) return ncclSuccess;
  std::vector<PendingOp> ops = std::move(group_ops);
  group_ops.clear();
  const ncclResult_t error = group_error;
  group_error = ncclSuccess;
  if (error != ncclSuccess) return error;  // the group's calls are dropped
  ncclResult_t result = ncclSuccess;
  for (PendingOp& op : ops) {
    if (ncclResult_t r = Enqueue(op.comm, op.stream, std::move(op.items)); r != ncclSuccess) {
      result = r;
    }
  }
  return result;
}

}  // extern "C"
