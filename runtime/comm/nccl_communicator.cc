#include "runtime/comm/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/comm/collective_protocol.h"
#include "runtime/comm/collective_wire.h"

namespace lockstep::comm {
namespace internal {

// One call of a NcclCommunicator: its deadline, shared by every round, and the
// primitives it runs, whose errors it names ("AllReduce('vote') on rank 1 of nccl
// group 'gen0/exec': ...") and remembers (the communicator then aborts them).
class NcclCall {
 public:
  NcclCall(CollectivePrimitives& primitives, const CallSpec& spec, const CallOptions& options)
      : primitives_(primitives),
        spec_(spec),
        timeout_(options.timeout),
        deadline_(absl::Now() + options.timeout) {}

  bool primitive_failed() const { return primitive_failed_; }

  // The header round (collective_wire.h).
  absl::StatusOr<WireHeaders> Headers(absl::Span<const int64_t> fields,
                                      absl::string_view inline_data = {}) {
    const int world = primitives_.world_size();
    const std::vector<int64_t> mine = EncodeWireHeader(spec_, world, fields, inline_data);
    std::vector<int64_t> rows(mine.size() * world);
    RETURN_IF_ERROR(AllGatherFixed(
        absl::string_view(reinterpret_cast<const char*>(mine.data()), mine.size() * 8),
        reinterpret_cast<char*>(rows.data())));
    return CheckWireHeaders(spec_, world, std::move(rows));
  }

  absl::Status AllGatherFixed(absl::string_view in, char* out) {
    RETURN_IF_ERROR(BeforePrimitive());
    return Named(primitives_.AllGatherFixed(in, out, deadline_));
  }
  absl::Status Broadcast(char* data, size_t size, int root) {
    RETURN_IF_ERROR(BeforePrimitive());
    return Named(primitives_.Broadcast(data, size, root, deadline_));
  }
  // After the header round, before any payload: every rank computes every rank's
  // payload bytes (`bytes(r)`: sent, received; its own block excluded) from the same
  // headers, so all refuse together (ResourceExhausted naming the first rank over the
  // group's buffers) instead of one refusing while its peers wait in the exchange.
  absl::Status AgreedFits(absl::FunctionRef<std::pair<int64_t, int64_t>(int rank)> bytes) const {
    const size_t limit = primitives_.max_transfer_bytes();
    for (int r = 0; r < primitives_.world_size(); ++r) {
      const auto [send, recv] = bytes(r);
      if (static_cast<size_t>(send) <= limit && static_cast<size_t>(recv) <= limit) continue;
      return absl::ResourceExhaustedError(absl::StrCat(
          Where(), ": rank ", r, " would send ", send, " bytes and receive ", recv,
          ", more than the group's ", limit,
          "-byte buffers (NcclGroupOptions::buffer_bytes); every rank refuses the call "
          "before any payload moves"));
    }
    return absl::OkStatus();
  }
  absl::Status SendRecv(absl::Span<const CollectivePrimitives::PeerTransfer> transfers) {
    RETURN_IF_ERROR(BeforePrimitive());
    return Named(primitives_.GroupedSendRecv(transfers, deadline_));
  }

 private:
  std::string Where() const {
    return absl::StrCat(DescribeCall(spec_.op, spec_.tag), " on rank ", primitives_.rank(),
                        " of nccl group '", primitives_.name(), "'");
  }
  // A round that would start after the deadline does not start.
  absl::Status BeforePrimitive() const {
    if (absl::Now() < deadline_) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat(
        Where(), " timed out after ", absl::FormatDuration(timeout_), " between rounds"));
  }
  absl::Status Named(absl::Status status) {
    if (status.ok()) return status;
    primitive_failed_ = true;
    std::string message = absl::StrCat(Where(), ": ", status.message());
    if (absl::IsDeadlineExceeded(status)) {
      absl::StrAppend(&message, " (timeout ", absl::FormatDuration(timeout_), ")");
    }
    return absl::Status(status.code(), message);
  }

  CollectivePrimitives& primitives_;
  const CallSpec& spec_;
  const absl::Duration timeout_;
  const absl::Time deadline_;
  bool primitive_failed_ = false;
};

}  // namespace internal

using internal::NcclCall;
using PeerTransfer = CollectivePrimitives::PeerTransfer;

namespace {

template <typename T>
absl::string_view Bytes(absl::Span<T> values) {
  return absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Splits `flat` (world blocks of `stride` bytes) into rank r's first sizes[r] bytes.
std::vector<std::string> SplitPadded(const std::string& flat, size_t stride,
                                     absl::Span<const size_t> sizes) {
  std::vector<std::string> out;
  for (size_t r = 0; r < sizes.size(); ++r) out.push_back(flat.substr(r * stride, sizes[r]));
  return out;
}

// Runs an exchange in which this rank sends send[r] (send_sizes[r] bytes at
// send_offsets[r] of `send`) to every rank r and receives recv_sizes[r] bytes into
// `recv` + recv_offsets[r]: its own block by a copy, the others in one group.
absl::Status Exchange(NcclCall& call, int rank, const char* send,
                      absl::Span<const int64_t> send_offsets, absl::Span<const int64_t> send_sizes,
                      char* recv, absl::Span<const int64_t> recv_offsets,
                      absl::Span<const int64_t> recv_sizes) {
  std::vector<PeerTransfer> transfers;
  for (int r = 0; r < static_cast<int>(send_sizes.size()); ++r) {
    if (r == rank) {
      if (recv_sizes[r] > 0)
        std::memmove(recv + recv_offsets[r], send + send_offsets[r], recv_sizes[r]);
      continue;
    }
    if (send_sizes[r] == 0 && recv_sizes[r] == 0) continue;
    transfers.push_back({r, absl::string_view(send + send_offsets[r], send_sizes[r]),
                         recv + recv_offsets[r], static_cast<size_t>(recv_sizes[r])});
  }
  return call.SendRecv(transfers);
}

// Byte offsets of consecutive blocks of `sizes` (scaled by `unit`).
std::vector<int64_t> Offsets(absl::Span<const int64_t> sizes, int64_t unit = 1) {
  std::vector<int64_t> out;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    out.push_back(offset);
    offset += size * unit;
  }
  return out;
}

std::vector<int64_t> Scaled(absl::Span<const int64_t> sizes, int64_t unit) {
  std::vector<int64_t> out(sizes.begin(), sizes.end());
  for (int64_t& size : out) size *= unit;
  return out;
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<CollectivePrimitives> primitives)
    : primitives_(std::move(primitives)),
      rank_(primitives_->rank()),
      world_size_(primitives_->world_size()) {}

NcclCommunicator::~NcclCommunicator() = default;

absl::Status NcclCommunicator::Run(const CallSpec& spec, const CallOptions& options,
                                   absl::FunctionRef<absl::Status(NcclCall&)> body) {
  RETURN_IF_ERROR(broken_.CheckUsable(
      absl::StrCat("nccl communicator of group '", primitives_->name(), "' rank ", rank_)));
  NcclCall call(*primitives_, spec, options);
  absl::Status status = body(call);
  if (broken_.Record(status)) {
    if (call.primitive_failed()) primitives_->Abort();  // Once: never called again.
    LOCKSTEP_LOG_WARN("comm", "nccl group '{}' rank {} broken: {}", primitives_->name(), rank_,
                      status.ToString());
  }
  return status;
}

absl::Status NcclCommunicator::AllReduce(absl::Span<int64_t> data, ReduceOp op,
                                         const CallOptions& options) {
  const CallSpec spec = SpecAllReduce(options.tag, data.size(), op);
  return Run(spec, options, [&](NcclCall& call) -> absl::Status {
    const int64_t n = data.size();
    std::vector<const char*> inputs(world_size_);
    if (n * 8 <= static_cast<int64_t>(kWireInlineBytes)) {
      ASSIGN_OR_RETURN(WireHeaders headers, call.Headers({}, Bytes(data)));
      for (int r = 0; r < world_size_; ++r) inputs[r] = headers.inline_bytes(r).data();
      if (n > 0) ReduceInRankOrder(data.data(), n, inputs, op);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(call.Headers({}).status());
    std::vector<int64_t> all(n * world_size_);
    RETURN_IF_ERROR(call.AllGatherFixed(Bytes(data), reinterpret_cast<char*>(all.data())));
    for (int r = 0; r < world_size_; ++r) inputs[r] = reinterpret_cast<const char*>(&all[r * n]);
    ReduceInRankOrder(data.data(), n, inputs, op);
    return absl::OkStatus();
  });
}

absl::Status NcclCommunicator::Barrier(const CallOptions& options) {
  const CallSpec spec = SpecBarrier(options.tag);
  return Run(spec, options, [&](NcclCall& call) { return call.Headers({}).status(); });
}

absl::Status NcclCommunicator::AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                         const CallOptions& options) {
  const CallSpec spec = SpecAllGather(options.tag, rank_, world_size_, in.size(), out.size());
  return Run(spec, options, [&](NcclCall& call) -> absl::Status {
    const size_t bytes = in.size() * 8;
    if (bytes <= kWireInlineBytes) {
      ASSIGN_OR_RETURN(WireHeaders headers, call.Headers({}, Bytes(in)));
      for (int r = 0; r < world_size_; ++r) {
        if (bytes > 0)
          std::memcpy(out.data() + r * in.size(), headers.inline_bytes(r).data(), bytes);
      }
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(call.Headers({}).status());
    return call.AllGatherFixed(Bytes(in), reinterpret_cast<char*>(out.data()));
  });
}

absl::StatusOr<std::vector<std::string>> NcclCommunicator::AllGatherBytes(
    absl::string_view data, const CallOptions& options) {
  const CallSpec spec = SpecAllGatherBytes(options.tag);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](NcclCall& call) -> absl::Status {
    const int64_t size = data.size();
    ASSIGN_OR_RETURN(WireHeaders headers, call.Headers({&size, 1}, data));
    if (headers.all_inline()) {
      for (int r = 0; r < world_size_; ++r) result.emplace_back(headers.inline_bytes(r));
      return absl::OkStatus();
    }
    // Padded to the largest rank's size: one fixed all-gather.
    const std::vector<size_t> sizes = headers.column(0);
    const size_t stride = *std::max_element(sizes.begin(), sizes.end());
    std::string mine(data);
    mine.resize(stride, '\0');
    std::string all(stride * world_size_, '\0');
    RETURN_IF_ERROR(call.AllGatherFixed(mine, all.data()));
    result = SplitPadded(all, stride, sizes);
    return absl::OkStatus();
  }));
  return result;
}

absl::Status NcclCommunicator::Broadcast(std::string* data, int root, const CallOptions& options) {
  const CallSpec spec = SpecRooted(CollectiveOp::kBroadcast, options.tag, rank_, world_size_, root);
  return Run(spec, options, [&](NcclCall& call) -> absl::Status {
    const int64_t size = data->size();
    ASSIGN_OR_RETURN(WireHeaders headers,
                     call.Headers({&size, 1}, rank_ == root ? absl::string_view(*data) : ""));
    if (headers.has_inline(root)) {
      if (rank_ != root) *data = std::string(headers.inline_bytes(root));
      return absl::OkStatus();
    }
    const size_t root_size = headers.field(root, 0);
    if (rank_ != root) data->assign(root_size, '\0');
    return call.Broadcast(data->data(), root_size, root);
  });
}

absl::StatusOr<std::vector<std::string>> NcclCommunicator::Gather(absl::string_view data, int root,
                                                                  const CallOptions& options) {
  const CallSpec spec = SpecRooted(CollectiveOp::kGather, options.tag, rank_, world_size_, root);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](NcclCall& call) -> absl::Status {
    const int64_t size = data.size();
    ASSIGN_OR_RETURN(WireHeaders headers, call.Headers({&size, 1}, data));
    if (headers.all_inline()) {
      if (rank_ == root) {
        for (int r = 0; r < world_size_; ++r) result.emplace_back(headers.inline_bytes(r));
      }
      return absl::OkStatus();
    }
    // Every rank sends to the root; the root receives from every rank.
    RETURN_IF_ERROR(call.AgreedFits([&](int r) -> std::pair<int64_t, int64_t> {
      if (r != root) return {headers.field(r, 0), 0};
      int64_t in = 0;
      for (int s = 0; s < world_size_; ++s) in += s == root ? 0 : headers.field(s, 0);
      return {0, in};
    }));
    std::vector<int64_t> send_sizes(world_size_, 0);
    std::vector<int64_t> recv_sizes(world_size_, 0);
    send_sizes[root] = size;
    if (rank_ == root) {
      for (int r = 0; r < world_size_; ++r) recv_sizes[r] = headers.field(r, 0);
    }
    std::vector<int64_t> send_offsets(world_size_, 0);
    const std::vector<int64_t> recv_offsets = Offsets(recv_sizes);
    std::string flat(recv_offsets.back() + recv_sizes.back(), '\0');
    RETURN_IF_ERROR(Exchange(call, rank_, data.data(), send_offsets, send_sizes, flat.data(),
                             recv_offsets, recv_sizes));
    if (rank_ == root) {
      for (int r = 0; r < world_size_; ++r)
        result.push_back(flat.substr(recv_offsets[r], recv_sizes[r]));
    }
    return absl::OkStatus();
  }));
  return result;
}

absl::Status NcclCommunicator::AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                                        const CallOptions& options) {
  const CallSpec spec = SpecAllToAll(options.tag, rank_, world_size_, send.size(), recv.size());
  return Run(spec, options, [&](NcclCall& call) -> absl::Status {
    const int64_t block = spec.args[0] * 8;  // Bytes per peer.
    if (block * world_size_ <= static_cast<int64_t>(kWireInlineBytes)) {
      ASSIGN_OR_RETURN(WireHeaders headers, call.Headers({}, Bytes(send)));
      for (int s = 0; s < world_size_; ++s) {
        if (block > 0) {
          std::memcpy(reinterpret_cast<char*>(recv.data()) + s * block,
                      headers.inline_bytes(s).data() + rank_ * block, block);
        }
      }
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(call.Headers({}).status());
    const std::vector<int64_t> sizes(world_size_, block);
    const std::vector<int64_t> offsets = Offsets(sizes);
    return Exchange(call, rank_, reinterpret_cast<const char*>(send.data()), offsets, sizes,
                    reinterpret_cast<char*>(recv.data()), offsets, sizes);
  });
}

absl::Status NcclCommunicator::AllToAllV(absl::Span<const float> send,
                                         absl::Span<const int64_t> send_counts,
                                         absl::Span<float> recv,
                                         absl::Span<const int64_t> recv_counts,
                                         const CallOptions& options) {
  const CallSpec spec = SpecAllToAllV(options.tag, rank_, world_size_, send_counts, send.size(),
                                      recv_counts, recv.size());
  return Run(spec, options, [&](NcclCall& call) -> absl::Status {
    ASSIGN_OR_RETURN(WireHeaders headers,
                     call.Headers(AllToAllVFields(spec, send_counts, recv_counts)));
    RETURN_IF_ERROR(CheckAllToAllVFields(spec, world_size_,
                                         [&](int r, int i) { return headers.field(r, i); }));
    constexpr int64_t kFloat = sizeof(float);
    RETURN_IF_ERROR(call.AgreedFits([&](int r) -> std::pair<int64_t, int64_t> {
      int64_t out = 0, in = 0;
      for (int s = 0; s < world_size_; ++s) {
        if (s == r) continue;
        out += headers.field(r, s) * kFloat;
        in += headers.field(r, world_size_ + s) * kFloat;
      }
      return {out, in};
    }));
    return Exchange(call, rank_, reinterpret_cast<const char*>(send.data()),
                    Offsets(send_counts, kFloat), Scaled(send_counts, kFloat),
                    reinterpret_cast<char*>(recv.data()), Offsets(recv_counts, kFloat),
                    Scaled(recv_counts, kFloat));
  });
}

absl::StatusOr<std::vector<std::string>> NcclCommunicator::AllToAllBytes(
    const std::vector<std::string>& send, const CallOptions& options) {
  const CallSpec spec = SpecAllToAllBytes(options.tag, rank_, world_size_, send.size());
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](NcclCall& call) -> absl::Status {
    const FlatBlocks mine = FlattenAllToAllBytes(spec, rank_, send);
    ASSIGN_OR_RETURN(WireHeaders headers, call.Headers(mine.sizes));
    std::vector<int64_t> recv_sizes(world_size_);
    for (int s = 0; s < world_size_; ++s) recv_sizes[s] = headers.field(s, rank_);
    RETURN_IF_ERROR(call.AgreedFits([&](int r) -> std::pair<int64_t, int64_t> {
      int64_t out = 0, in = 0;
      for (int s = 0; s < world_size_; ++s) {
        if (s == r) continue;
        out += headers.field(r, s);
        in += headers.field(s, r);
      }
      return {out, in};
    }));
    const std::vector<int64_t> recv_offsets = Offsets(recv_sizes);
    std::string flat_recv(recv_offsets.back() + recv_sizes.back(), '\0');
    RETURN_IF_ERROR(Exchange(call, rank_, mine.flat.data(), Offsets(mine.sizes), mine.sizes,
                             flat_recv.data(), recv_offsets, recv_sizes));
    for (int s = 0; s < world_size_; ++s) {
      result.push_back(flat_recv.substr(recv_offsets[s], recv_sizes[s]));
    }
    return absl::OkStatus();
  }));
  return result;
}

}  // namespace lockstep::comm
