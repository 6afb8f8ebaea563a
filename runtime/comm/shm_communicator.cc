#include "runtime/comm/shm_communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/comm/collective_protocol.h"
#include "runtime/comm/shm_call.h"
#include "runtime/comm/shm_group.h"

namespace lockstep::comm {

using internal::ShmCall;

namespace {

template <typename T>
absl::string_view Bytes(absl::Span<T> values) {
  return absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
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

absl::Status ShmCommunicator::Run(const CallSpec& spec, const CallOptions& options,
                                  absl::FunctionRef<absl::Status(ShmCall&)> body) {
  RETURN_IF_ERROR(
      broken_.CheckUsable(absl::StrCat("shm communicator of group '", name_, "' rank ", rank_)));
  ShmCall call(*group_, spec.op, options);
  absl::Status status = body(call);
  if (broken_.Record(status)) {
    group_->MarkBroken(status.code());
    LOCKSTEP_LOG_WARN("comm", "shm group '{}' rank {} broken: {}", name_, rank_, status.ToString());
  }
  return status;
}

absl::Status ShmCommunicator::AllReduce(absl::Span<int64_t> data, ReduceOp op,
                                        const CallOptions& options) {
  const CallSpec spec = SpecAllReduce(options.tag, data.size(), op);
  const int64_t n = data.size();
  return Run(spec, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(spec, {}, Bytes(data)));
    const int64_t per_chunk = call.chunk_bytes() / sizeof(int64_t);
    return call.Transfer([&](int64_t begin, absl::Span<const char* const> chunks) {
      const int64_t first = begin / static_cast<int64_t>(sizeof(int64_t));
      ReduceInRankOrder(data.data() + first, std::min(per_chunk, n - first), chunks, op);
    });
  });
}

absl::Status ShmCommunicator::Barrier(const CallOptions& options) {
  const CallSpec spec = SpecBarrier(options.tag);
  return Run(spec, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(spec, {}, {}));
    return call.Transfer(absl::Span<const ShmCall::Read>());
  });
}

absl::Status ShmCommunicator::AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                        const CallOptions& options) {
  const CallSpec spec = SpecAllGather(options.tag, rank_, world_size_, in.size(), out.size());
  const int64_t n = in.size();
  return Run(spec, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(spec, {}, Bytes(in), /*allow_direct=*/true));
    std::vector<ShmCall::Read> reads;
    for (int s = 0; s < world_size_; ++s) {
      reads.push_back({s, 0, n * 8, reinterpret_cast<char*>(out.data() + s * n)});
    }
    return call.Transfer(reads);
  });
}

absl::StatusOr<std::vector<std::string>> ShmCommunicator::AllGatherBytes(
    absl::string_view data, const CallOptions& options) {
  const CallSpec spec = SpecAllGatherBytes(options.tag);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(spec, {}, data, /*allow_direct=*/true));
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
  const CallSpec spec = SpecRooted(CollectiveOp::kBroadcast, options.tag, rank_, world_size_, root);
  return Run(spec, options, [&](ShmCall& call) -> absl::Status {
    const absl::string_view payload = rank_ == root ? absl::string_view(*data) : "";
    RETURN_IF_ERROR(call.Start(spec, {}, payload, /*allow_direct=*/true));
    if (rank_ == root) return call.Transfer(absl::Span<const ShmCall::Read>());
    data->resize(call.payload_bytes(root));
    const ShmCall::Read read = {root, 0, call.payload_bytes(root), data->data()};
    return call.Transfer({&read, 1});
  });
}

absl::StatusOr<std::vector<std::string>> ShmCommunicator::Gather(absl::string_view data, int root,
                                                                 const CallOptions& options) {
  const CallSpec spec = SpecRooted(CollectiveOp::kGather, options.tag, rank_, world_size_, root);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(spec, {}, data, /*allow_direct=*/true));
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
  const CallSpec spec = SpecAllToAll(options.tag, rank_, world_size_, send.size(), recv.size());
  const int64_t n = spec.args[0];  // Per block.
  return Run(spec, options, [&](ShmCall& call) -> absl::Status {
    RETURN_IF_ERROR(call.Start(spec, {}, Bytes(send), /*allow_direct=*/true, rank_ * n * 8, n * 8));
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
  const CallSpec spec = SpecAllToAllV(options.tag, rank_, world_size_, send_counts, send.size(),
                                      recv_counts, recv.size());
  return Run(spec, options, [&](ShmCall& call) -> absl::Status {
    const std::vector<int64_t> fields = AllToAllVFields(spec, send_counts, recv_counts);
    const auto field = [&](int r, int i) { return call.field(r, i); };
    int64_t send_total = 0;
    int64_t own_offset = 0;  // Floats before this rank's own block.
    if (spec.local.ok()) {
      own_offset = BlockOffset([&](int, int i) { return send_counts[i]; }, rank_, rank_);
      for (int64_t count : send_counts) send_total += count;
    }
    RETURN_IF_ERROR(call.Start(spec, fields, Bytes(send.subspan(0, send_total)),
                               /*allow_direct=*/true, own_offset * 4,
                               spec.local.ok() ? send_counts[rank_] * 4 : 0));
    RETURN_IF_ERROR(CheckAllToAllVFields(spec, world_size_, field));
    std::vector<ShmCall::Read> reads;
    int64_t recv_offset = 0;
    for (int s = 0; s < world_size_; ++s) {
      const int64_t count = recv_counts[s];
      reads.push_back({s, BlockOffset(field, s, rank_) * 4, count * 4,
                       reinterpret_cast<char*>(recv.data() + recv_offset)});
      recv_offset += count;
    }
    return call.Transfer(reads);
  });
}

absl::StatusOr<std::vector<std::string>> ShmCommunicator::AllToAllBytes(
    const std::vector<std::string>& send, const CallOptions& options) {
  const CallSpec spec = SpecAllToAllBytes(options.tag, rank_, world_size_, send.size());
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](ShmCall& call) -> absl::Status {
    const FlatBlocks mine = FlattenAllToAllBytes(spec, rank_, send);
    RETURN_IF_ERROR(call.Start(spec, mine.sizes, mine.flat, /*allow_direct=*/true,
                               mine.own_offset, spec.local.ok() ? mine.sizes[rank_] : 0));
    const auto field = [&](int r, int i) { return call.field(r, i); };
    result.resize(world_size_);
    std::vector<ShmCall::Read> reads;
    for (int s = 0; s < world_size_; ++s) {
      result[s].resize(field(s, rank_));
      reads.push_back({s, BlockOffset(field, s, rank_), field(s, rank_), result[s].data()});
    }
    return call.Transfer(reads);
  }));
  return result;
}

}  // namespace lockstep::comm
