#include "runtime/comm/shm_communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/comm/shm_call.h"
#include "runtime/comm/shm_group.h"

namespace lockstep::comm {

using internal::ShmCall;

namespace {

template <typename T>
absl::string_view Bytes(absl::Span<T> values) {
  return absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// out[i] = reduction over ranks (in rank order) of chunks[r][i], for i < count.
void ReduceChunks(int64_t* out, int64_t count, absl::Span<const char* const> chunks, ReduceOp op) {
  const auto* first = reinterpret_cast<const int64_t*>(chunks[0]);
  std::copy_n(first, count, out);
  for (size_t r = 1; r < chunks.size(); ++r) {
    const auto* in = reinterpret_cast<const int64_t*>(chunks[r]);
    switch (op) {
      case ReduceOp::kSum:
        // Two's complement wrap-around, as the other transports, without signed overflow.
        for (int64_t i = 0; i < count; ++i) {
          out[i] =
              static_cast<int64_t>(static_cast<uint64_t>(out[i]) + static_cast<uint64_t>(in[i]));
        }
        break;
      case ReduceOp::kMin:
        for (int64_t i = 0; i < count; ++i) out[i] = std::min(out[i], in[i]);
        break;
      case ReduceOp::kMax:
        for (int64_t i = 0; i < count; ++i) out[i] = std::max(out[i], in[i]);
        break;
    }
  }
}

absl::Status BadRoot(CollectiveOp op, absl::string_view tag, int rank, int root, int world) {
  if (root >= 0 && root < world) return absl::OkStatus();
  return InvalidCallArgument(op, tag, rank,
                             absl::StrCat("root ", root, " is outside the group of ", world));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmCommunicator>> ShmCommunicator::Create(
    const ShmOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<internal::ShmGroup> group, internal::ShmGroup::Join(options));
  LOCKSTEP_LOG_INFO("comm", "shm group '{}': rank {} of {} attached ({} bytes of shared memory)",
                    options.name, options.rank, options.world_size,
                    group->segment().layout().total_bytes);
  return std::unique_ptr<ShmCommunicator>(new ShmCommunicator(std::move(group)));
}

ShmCommunicator::ShmCommunicator(std::unique_ptr<internal::ShmGroup> group)
    : group_(std::move(group)),
      rank_(group_->rank()),
      world_size_(group_->world()),
      name_(group_->name()) {}

ShmCommunicator::~ShmCommunicator() = default;

uint64_t ShmCommunicator::rounds_published() const {
  return group_->segment().control(rank_).seq.load();
}

absl::Status ShmCommunicator::Run(CollectiveOp op, const CallOptions& options,
                                  absl::FunctionRef<absl::Status(ShmCall&)> body) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shm communicator of group '", name_, "' rank ", rank_,
                     " is broken by an earlier error: ", broken_.ToString()));
  }
  ShmCall call(*group_, op, options);
  absl::Status status = body(call);
  if (!status.ok()) {
    broken_ = status;
    group_->MarkBroken(status.code());
    LOCKSTEP_LOG_WARN("comm", "shm group '{}' rank {} broken: {}", name_, rank_, status.ToString());
  }
  return status;
}

absl::Status ShmCommunicator::AllReduce(absl::Span<int64_t> data, ReduceOp op,
                                        const CallOptions& options) {
  const int64_t n = data.size();
  const int64_t reduce = static_cast<int64_t>(op);
  const int64_t fp = CallFingerprint(CollectiveOp::kAllReduce, options.tag, {n, reduce});
  return Run(CollectiveOp::kAllReduce, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(fp, {n, reduce}, {}, absl::OkStatus(), Bytes(data)));
    const int64_t per_chunk = call.chunk_bytes() / sizeof(int64_t);
    return call.Transfer([&](int64_t begin, absl::Span<const char* const> chunks) {
      const int64_t first = begin / static_cast<int64_t>(sizeof(int64_t));
      ReduceChunks(data.data() + first, std::min(per_chunk, n - first), chunks, op);
    });
  });
}

absl::Status ShmCommunicator::Barrier(const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kBarrier, options.tag);
  return Run(CollectiveOp::kBarrier, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(fp, {}, {}, absl::OkStatus(), {}));
    return call.Transfer(absl::Span<const ShmCall::Read>());
  });
}

absl::Status ShmCommunicator::AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                        const CallOptions& options) {
  const int64_t n = in.size();
  const int64_t fp = CallFingerprint(CollectiveOp::kAllGather, options.tag, {n});
  absl::Status local;
  if (out.size() != in.size() * world_size_) {
    local = InvalidCallArgument(
        CollectiveOp::kAllGather, options.tag, rank_,
        absl::StrCat("out has ", out.size(), " elements, expected ", world_size_, " * ", n));
  }
  return Run(CollectiveOp::kAllGather, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(fp, {n}, {}, local, Bytes(in), /*allow_direct=*/true));
    std::vector<ShmCall::Read> reads;
    for (int s = 0; s < world_size_; ++s) {
      reads.push_back({s, 0, n * 8, reinterpret_cast<char*>(out.data() + s * n)});
    }
    return call.Transfer(reads);
  });
}

absl::StatusOr<std::vector<std::string>> ShmCommunicator::AllGatherBytes(
    absl::string_view data, const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kAllGatherBytes, options.tag);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(CollectiveOp::kAllGatherBytes, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(fp, {}, {}, absl::OkStatus(), data, /*allow_direct=*/true));
    result.resize(world_size_);
    std::vector<ShmCall::Read> reads;
    for (int s = 0; s < world_size_; ++s) {
      result[s].resize(call.payload_bytes(s));
      reads.push_back({s, 0, call.payload_bytes(s), result[s].data()});
    }
    return call.Transfer(reads);
  }));
  return result;
}

absl::Status ShmCommunicator::Broadcast(std::string* data, int root, const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kBroadcast, options.tag, {root});
  const absl::Status local =
      BadRoot(CollectiveOp::kBroadcast, options.tag, rank_, root, world_size_);
  return Run(CollectiveOp::kBroadcast, options, [&](ShmCall& call) -> absl::Status {
    const absl::string_view payload = rank_ == root ? absl::string_view(*data) : "";
    RETURN_IF_ERROR(call.Start(fp, {root}, {}, local, payload, /*allow_direct=*/true));
    if (rank_ == root) return call.Transfer(absl::Span<const ShmCall::Read>());
    data->resize(call.payload_bytes(root));
    const ShmCall::Read read = {root, 0, call.payload_bytes(root), data->data()};
    return call.Transfer({&read, 1});
  });
}

absl::StatusOr<std::vector<std::string>> ShmCommunicator::Gather(absl::string_view data, int root,
                                                                 const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kGather, options.tag, {root});
  const absl::Status local = BadRoot(CollectiveOp::kGather, options.tag, rank_, root, world_size_);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(CollectiveOp::kGather, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(fp, {root}, {}, local, data, /*allow_direct=*/true));
    std::vector<ShmCall::Read> reads;
    if (rank_ == root) {
      result.resize(world_size_);
      for (int s = 0; s < world_size_; ++s) {
        result[s].resize(call.payload_bytes(s));
        reads.push_back({s, 0, call.payload_bytes(s), result[s].data()});
      }
    }
    return call.Transfer(reads);
  }));
  return result;
}

absl::Status ShmCommunicator::AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                                       const CallOptions& options) {
  const int64_t n = send.size() / world_size_;  // Per block.
  const int64_t fp = CallFingerprint(CollectiveOp::kAllToAll, options.tag, {n});
  absl::Status local;
  if (send.size() % world_size_ != 0 || recv.size() != send.size()) {
    local = InvalidCallArgument(
        CollectiveOp::kAllToAll, options.tag, rank_,
        absl::StrCat("send has ", send.size(), " and recv ", recv.size(),
                     " elements; both must be the same multiple of the world size ", world_size_));
  }
  return Run(CollectiveOp::kAllToAll, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(
        call.Start(fp, {n}, {}, local, Bytes(send), /*allow_direct=*/true, rank_ * n * 8, n * 8));
    std::vector<ShmCall::Read> reads;
    for (int s = 0; s < world_size_; ++s) {
      reads.push_back({s, rank_ * n * 8, n * 8, reinterpret_cast<char*>(recv.data() + s * n)});
    }
    return call.Transfer(reads);
  });
}

absl::Status ShmCommunicator::AllToAllV(absl::Span<const float> send,
                                        absl::Span<const int64_t> send_counts,
                                        absl::Span<float> recv,
                                        absl::Span<const int64_t> recv_counts,
                                        const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kAllToAllV, options.tag);
  absl::Status local =
      CheckAllToAllVCounts(options.tag, rank_, "send", send_counts, send.size(), world_size_);
  if (local.ok()) {
    local = CheckAllToAllVCounts(options.tag, rank_, "recv", recv_counts, recv.size(), world_size_);
  }
  return Run(CollectiveOp::kAllToAllV, options, [&](ShmCall& call) -> absl::Status {
    std::vector<int64_t> fields;
    int64_t send_total = 0;
    int64_t own_offset = 0;  // Floats before this rank's own block.
    if (local.ok()) {
      fields.assign(send_counts.begin(), send_counts.end());
      fields.insert(fields.end(), recv_counts.begin(), recv_counts.end());
      for (int r = 0; r < world_size_; ++r) {
        if (r == rank_) own_offset = send_total;
        send_total += send_counts[r];
      }
    }
    RETURN_IF_ERROR(call.Start(fp, {}, fields, local, Bytes(send.subspan(0, send_total)),
                               /*allow_direct=*/true, own_offset * 4,
                               local.ok() ? send_counts[rank_] * 4 : 0));
    const int world = world_size_;
    for (int s = 0; s < world; ++s) {
      for (int r = 0; r < world; ++r) {
        const int64_t sent = call.field(s, r);
        const int64_t expected = call.field(r, world + s);
        if (sent != expected) {
          return absl::InternalError(absl::StrCat(
              "collective desync: ", DescribeCall(CollectiveOp::kAllToAllV, options.tag), ": rank ",
              s, " sends ", sent, " floats to rank ", r, ", which expects ", expected));
        }
      }
    }
    std::vector<ShmCall::Read> reads;
    int64_t recv_offset = 0;
    for (int s = 0; s < world; ++s) {
      int64_t send_offset = 0;
      for (int q = 0; q < rank_; ++q) send_offset += call.field(s, q);
      const int64_t count = recv_counts[s];
      reads.push_back(
          {s, send_offset * 4, count * 4, reinterpret_cast<char*>(recv.data() + recv_offset)});
      recv_offset += count;
    }
    return call.Transfer(reads);
  });
}

absl::StatusOr<std::vector<std::string>> ShmCommunicator::AllToAllBytes(
    const std::vector<std::string>& send, const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kAllToAllBytes, options.tag);
  absl::Status local;
  if (send.size() != static_cast<size_t>(world_size_)) {
    local =
        InvalidCallArgument(CollectiveOp::kAllToAllBytes, options.tag, rank_,
                            absl::StrCat("send has ", send.size(),
                                         " entries, expected one per rank (", world_size_, ")"));
  }
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(CollectiveOp::kAllToAllBytes, options, [&](ShmCall& call) -> absl::Status {
    std::vector<int64_t> sizes;
    std::string flat;
    int64_t own_offset = 0;
    if (local.ok()) {
      for (int r = 0; r < world_size_; ++r) {
        if (r == rank_) own_offset = flat.size();
        sizes.push_back(send[r].size());
        flat += send[r];
      }
    }
    RETURN_IF_ERROR(call.Start(fp, {}, sizes, local, flat, /*allow_direct=*/true, own_offset,
                               local.ok() ? sizes[rank_] : 0));
    result.resize(world_size_);
    std::vector<ShmCall::Read> reads;
    for (int s = 0; s < world_size_; ++s) {
      int64_t offset = 0;
      for (int q = 0; q < rank_; ++q) offset += call.field(s, q);
      result[s].resize(call.field(s, rank_));
      reads.push_back({s, offset, call.field(s, rank_), result[s].data()});
    }
    return call.Transfer(reads);
  }));
  return result;
}

}  // namespace lockstep::comm
