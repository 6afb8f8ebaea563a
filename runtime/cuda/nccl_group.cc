#include "runtime/cuda/nccl_group.h"

#include <cuda_runtime.h>  // the templated cudaMalloc and cudaMallocHost (not in the C API)

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/poll.h"

namespace lockstep::cuda {
namespace {

absl::StatusCode CodeOf(ncclResult_t result) {
  switch (result) {
    case ncclRemoteError:
    case ncclSystemError:
      return absl::StatusCode::kUnavailable;
    case ncclInvalidUsage:
    case ncclInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

// Bytes per element of `type`; InvalidArgument for a type this NCCL does not have.
absl::StatusOr<size_t> ElementBytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
#endif
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("device all-to-all-v: unknown NCCL data type ", static_cast<int>(type)));
  }
}

}  // namespace

ncclResult_t NcclAsyncState(ncclComm_t comm, NcclGetAsyncError get) {
  ncclResult_t state = ncclInProgress;
  const ncclResult_t asked = get(comm, &state);
  return asked != ncclSuccess ? asked : state;
}

std::string NcclVersionString() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "unknown";
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z from 2.9 on.
  return absl::StrCat(version / 10000, ".", version / 100 % 100, ".", version % 100);
}

absl::StatusOr<std::unique_ptr<NcclGroup>> NcclGroup::Create(const NcclGroupOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("nccl group '", options.name, "': rank ",
                                                   options.rank, " is not in a world of ",
                                                   options.world_size));
  }
  if (options.rendezvous == nullptr && options.rank != 0) {
    return absl::InvalidArgumentError(absl::StrCat("nccl group '", options.name, "': rank ",
                                                   options.rank, " needs the rendezvous"));
  }
  std::unique_ptr<NcclGroup> group(new NcclGroup(options));
  const absl::Time deadline = absl::Now() + options.bootstrap_timeout;
  RETURN_IF_ERROR(group->Start(deadline));
  return group;
}

absl::Status NcclGroup::Start(absl::Time deadline) {
  const std::string where = absl::StrCat("nccl group '", options_.name, "' rank ", options_.rank,
                                         " of ", options_.world_size);
  int devices = 0;
  RETURN_IF_ERROR(CudaStatus(cudaGetDeviceCount(&devices), "cudaGetDeviceCount"));
  if (options_.local_rank < 0 || options_.local_rank >= devices) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": local rank ", options_.local_rank, " needs GPU ", options_.local_rank,
        " but this node has ", devices, " (nccl needs a GPU per rank)"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options_.local_rank), "cudaSetDevice"));
  LOCKSTEP_LOG_INFO("comm", "{}: NCCL {} on GPU {}", where, NcclVersionString(),
                    options_.local_rank);

  // The id: rank 0 makes and publishes it; the others wait for it.
  ncclUniqueId id;
  if (options_.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return absl::Status(CodeOf(r),
                          absl::StrCat(where, ": ncclGetUniqueId: ", ncclGetErrorString(r)));
    }
    if (options_.rendezvous != nullptr) {
      RETURN_IF_ERROR(options_.rendezvous->Set(
          options_.uid_key, absl::string_view(id.internal, sizeof(id.internal))));
    }
  } else {
    RETURN_IF_ERROR(options_.rendezvous->Wait({options_.uid_key}, deadline - absl::Now()));
    ASSIGN_OR_RETURN(std::string value, options_.rendezvous->Get(options_.uid_key));
    if (value.size() != sizeof(id.internal)) {
      return absl::InternalError(absl::StrCat(where, ": the id under '", options_.uid_key, "' has ",
                                              value.size(), " bytes, expected ",
                                              sizeof(id.internal)));
    }
    std::memcpy(id.internal, value.data(), value.size());
  }

  // Connections at init, not in the first step (unless the deployment says otherwise).
  setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = options_.name.c_str();
  ncclResult_t r = ncclCommInitRankConfig(&comm_, options_.world_size, id, options_.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    return absl::Status(CodeOf(r),
                        absl::StrCat(where, ": ncclCommInitRankConfig: ", ncclGetErrorString(r)));
  }
  absl::Status ready = Poll(
      [&]() -> absl::StatusOr<bool> {
        const ncclResult_t state = NcclAsyncState(comm_);
        if (state == ncclInProgress) return false;
        if (state != ncclSuccess) {
          return absl::Status(CodeOf(state), absl::StrCat(ncclGetErrorString(state), ": ",
                                                          ncclGetLastError(comm_)));
        }
        return true;
      },
      deadline, options_.spin, "ncclCommInitRankConfig");
  if (!ready.ok()) {
    Abort();
    return absl::Status(ready.code(),
                        absl::StrCat(where, ": bootstrap: ", ready.message(), " within ",
                                     absl::FormatDuration(options_.bootstrap_timeout)));
  }

  // Everything the operations need, made now: no allocation later.
  RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags"));
  RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming),
                             "cudaEventCreateWithFlags"));
  RETURN_IF_ERROR(CudaStatus(cudaMalloc(&device_, 2 * options_.buffer_bytes), "cudaMalloc"));
  RETURN_IF_ERROR(
      CudaStatus(cudaMallocHost(&pinned_, 2 * options_.buffer_bytes), "cudaMallocHost"));
  LOCKSTEP_LOG_INFO("comm", "{}: ready ({} bytes of device buffer)", where,
                    2 * options_.buffer_bytes);
  return absl::OkStatus();
}

NcclGroup::~NcclGroup() {
  if (aborted_) return;  // Aborted work may still reference the buffers.
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (device_ != nullptr) cudaFree(device_);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
}

void NcclGroup::Abort() {
  if (aborted_ || comm_ == nullptr) return;
  aborted_ = true;
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

absl::Status NcclGroup::AsyncError(absl::string_view what) {
  const ncclResult_t state = NcclAsyncState(comm_);
  if (state == ncclSuccess || state == ncclInProgress) return absl::OkStatus();
  return absl::Status(CodeOf(state), absl::StrCat(what, ": ", ncclGetErrorString(state), ": ",
                                                  ncclGetLastError(comm_)));
}

absl::Status NcclGroup::Settle(ncclResult_t result, absl::string_view what, absl::Time deadline) {
  if (result == ncclSuccess) return absl::OkStatus();
  if (result != ncclInProgress) {
    return absl::Status(CodeOf(result), absl::StrCat(what, ": ", ncclGetErrorString(result), ": ",
                                                     ncclGetLastError(comm_)));
  }
  return Poll(
      [&]() -> absl::StatusOr<bool> {
        if (NcclAsyncState(comm_) == ncclInProgress) return false;
        RETURN_IF_ERROR(AsyncError(what));
        return true;
      },
      deadline, options_.spin, what);
}

absl::Status NcclGroup::Wait(absl::Time deadline) {
  if (comm_ == nullptr) return absl::FailedPreconditionError("nccl group aborted");
  return Poll(
      [&]() -> absl::StatusOr<bool> {
        const cudaError_t query = cudaEventQuery(done_);
        if (query == cudaSuccess) return true;
        if (query != cudaErrorNotReady) {
          return CudaStatus(query, "cudaEventQuery of a collective");
        }
        RETURN_IF_ERROR(AsyncError("collective"));
        return false;
      },
      deadline, options_.spin, "collective");
}

absl::Status NcclGroup::Sync(absl::Time deadline) {
  if (comm_ == nullptr) return absl::FailedPreconditionError("nccl group aborted");
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord"));
  return Wait(deadline);
}

absl::Status NcclGroup::Fits(size_t send, size_t recv, absl::string_view what) const {
  if (comm_ == nullptr) return absl::FailedPreconditionError("nccl group aborted");
  if (send <= options_.buffer_bytes && recv <= options_.buffer_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " of ", send, " bytes out and ", recv, " in exceeds the group's ",
                   options_.buffer_bytes, "-byte buffers (NcclGroupOptions::buffer_bytes)"));
}

absl::Status NcclGroup::AllGatherFixed(absl::string_view in, char* out, absl::Time deadline) {
  const size_t n = in.size();
  const size_t total = n * options_.world_size;
  RETURN_IF_ERROR(Fits(n, total, "all-gather"));
  char* const send = device_;
  char* const recv = device_ + options_.buffer_bytes;
  char* const host_recv = pinned_ + options_.buffer_bytes;
  if (n > 0) std::memcpy(pinned_, in.data(), n);
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(send, pinned_, n, cudaMemcpyHostToDevice, stream_),
                             "cudaMemcpyAsync"));
  RETURN_IF_ERROR(
      Settle(ncclAllGather(send, recv, n, ncclUint8, comm_, stream_), "ncclAllGather", deadline));
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(host_recv, recv, total, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync"));
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord"));
  RETURN_IF_ERROR(Wait(deadline));
  if (total > 0) std::memcpy(out, host_recv, total);
  return absl::OkStatus();
}

absl::Status NcclGroup::Broadcast(char* data, size_t size, int root, absl::Time deadline) {
  RETURN_IF_ERROR(Fits(size, size, "broadcast"));
  char* const buffer = device_;
  if (rank() == root && size > 0) {
    std::memcpy(pinned_, data, size);
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(buffer, pinned_, size, cudaMemcpyHostToDevice, stream_),
                   "cudaMemcpyAsync"));
  }
  RETURN_IF_ERROR(Settle(ncclBroadcast(buffer, buffer, size, ncclUint8, root, comm_, stream_),
                         "ncclBroadcast", deadline));
  if (rank() != root) {
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(pinned_, buffer, size, cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpyAsync"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord"));
  RETURN_IF_ERROR(Wait(deadline));
  if (rank() != root && size > 0) std::memcpy(data, pinned_, size);
  return absl::OkStatus();
}

absl::Status NcclGroup::GroupedSendRecv(absl::Span<const PeerTransfer> transfers,
                                        absl::Time deadline) {
  // Every send back to back in the send half, every receive in the receive half.
  size_t send_total = 0;
  size_t recv_total = 0;
  std::vector<size_t> send_at(transfers.size());
  std::vector<size_t> recv_at(transfers.size());
  for (size_t i = 0; i < transfers.size(); ++i) {
    send_at[i] = send_total;
    recv_at[i] = recv_total;
    send_total += transfers[i].send.size();
    recv_total += transfers[i].recv_bytes;
  }
  RETURN_IF_ERROR(Fits(send_total, recv_total, "send/recv"));
  char* const host_recv = pinned_ + options_.buffer_bytes;
  char* const device_recv = device_ + options_.buffer_bytes;
  for (size_t i = 0; i < transfers.size(); ++i) {
    if (!transfers[i].send.empty()) {
      std::memcpy(pinned_ + send_at[i], transfers[i].send.data(), transfers[i].send.size());
    }
  }
  if (send_total > 0) {
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(device_, pinned_, send_total, cudaMemcpyHostToDevice, stream_),
                   "cudaMemcpyAsync"));
  }
  RETURN_IF_ERROR(Settle(ncclGroupStart(), "ncclGroupStart", deadline));
  for (size_t i = 0; i < transfers.size(); ++i) {
    const PeerTransfer& t = transfers[i];
    if (!t.send.empty()) {
      RETURN_IF_ERROR(
          Settle(ncclSend(device_ + send_at[i], t.send.size(), ncclUint8, t.peer, comm_, stream_),
                 "ncclSend", deadline));
    }
    if (t.recv_bytes > 0) {
      RETURN_IF_ERROR(Settle(
          ncclRecv(device_recv + recv_at[i], t.recv_bytes, ncclUint8, t.peer, comm_, stream_),
          "ncclRecv", deadline));
    }
  }
  RETURN_IF_ERROR(Settle(ncclGroupEnd(), "ncclGroupEnd", deadline));
  if (recv_total > 0) {
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(host_recv, device_recv, recv_total, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord"));
  RETURN_IF_ERROR(Wait(deadline));
  for (size_t i = 0; i < transfers.size(); ++i) {
    if (transfers[i].recv_bytes > 0) {
      std::memcpy(transfers[i].recv, host_recv + recv_at[i], transfers[i].recv_bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status NcclGroup::DeviceAllToAllV(const void* send, absl::Span<const int64_t> send_counts,
                                        void* recv, absl::Span<const int64_t> recv_counts,
                                        ncclDataType_t type, absl::Time deadline) {
  if (comm_ == nullptr) return absl::FailedPreconditionError("nccl group aborted");
  const int world = options_.world_size;
  if (send_counts.size() != static_cast<size_t>(world) ||
      recv_counts.size() != static_cast<size_t>(world)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device all-to-all-v of nccl group '", options_.name, "': ", send_counts.size(),
        " send and ", recv_counts.size(), " receive counts for ", world, " ranks"));
  }
  ASSIGN_OR_RETURN(const size_t element, ElementBytes(type));
  for (int r = 0; r < world; ++r) {
    if (send_counts[r] < 0 || recv_counts[r] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device all-to-all-v of nccl group '", options_.name, "': negative count for rank ", r,
          " (", send_counts[r], " to send, ", recv_counts[r], " to receive)"));
    }
  }
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  RETURN_IF_ERROR(Settle(ncclGroupStart(), "ncclGroupStart", deadline));
  for (int r = 0; r < world; ++r) {
    if (send_counts[r] > 0) {
      RETURN_IF_ERROR(
          Settle(ncclSend(in, send_counts[r], type, r, comm_, stream_), "ncclSend", deadline));
    }
    if (recv_counts[r] > 0) {
      RETURN_IF_ERROR(
          Settle(ncclRecv(out, recv_counts[r], type, r, comm_, stream_), "ncclRecv", deadline));
    }
    in += send_counts[r] * element;
    out += recv_counts[r] * element;
  }
  return Settle(ncclGroupEnd(), "ncclGroupEnd", deadline);
}

absl::StatusOr<std::unique_ptr<comm::Communicator>> CreateNcclCommunicator(
    const NcclGroupOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<NcclGroup> group, NcclGroup::Create(options));
  return std::unique_ptr<comm::Communicator>(
      std::make_unique<comm::NcclCommunicator>(std::move(group)));
}

}  // namespace lockstep::cuda
