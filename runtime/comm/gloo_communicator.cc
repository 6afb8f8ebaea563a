#include "runtime/comm/gloo_communicator.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "runtime/comm/gloo_call.h"

namespace lockstep::comm {

using internal::GlooCall;
using internal::GlooHeaders;

namespace {

// Whether every rank's data travelled inside its header.
bool AllInline(const GlooHeaders& headers, int world) {
  for (int r = 0; r < world; ++r) {
    if (!headers.has_inline(r)) return false;
  }
  return true;
}

bool IsTimeout(absl::string_view what) {
  return absl::StrContains(what, "Timed out") || absl::StrContains(what, "timeout") ||
         absl::StrContains(what, "Timeout");
}

// Splits `flat` into consecutive strings of `sizes`.
std::vector<std::string> Split(const std::string& flat, absl::Span<const size_t> sizes) {
  std::vector<std::string> out;
  out.reserve(sizes.size());
  size_t offset = 0;
  for (size_t size : sizes) {
    out.push_back(flat.substr(offset, size));
    offset += size;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    const GlooOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("gloo group '", options.prefix, "': rank ",
                                                   options.rank, " is not in a world of ",
                                                   options.world_size));
  }
  if (options.store == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo group '", options.prefix, "': no rendezvous store"));
  }
  if (options.prefix.empty()) {
    return absl::InvalidArgumentError("gloo group: empty prefix (name each group and launch)");
  }
  bool failed = false;
  std::string failure;
  std::shared_ptr<gloo::rendezvous::Context> context;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(absl::ToChronoMilliseconds(options.connect_timeout));
    gloo::rendezvous::PrefixStore store(options.prefix, *options.store);
    context->connectFullMesh(store, device);
    context->setTimeout(absl::ToChronoMilliseconds(options.default_timeout));
  } catch (const std::exception& e) {
    failed = true;
    failure = e.what();
  } catch (...) {
    failed = true;
    failure = "unknown exception";
  }
  if (failed) {
    const std::string where =
        absl::StrCat("gloo bootstrap of group '", options.prefix, "' on rank ", options.rank,
                     " of ", options.world_size, ": ");
    if (options.store_error) {
      absl::Status store_status = options.store_error();
      if (!store_status.ok()) {
        return absl::Status(store_status.code(), absl::StrCat(where, store_status.message()));
      }
    }
    return IsTimeout(failure) ? absl::DeadlineExceededError(absl::StrCat(where, failure))
                              : absl::UnavailableError(absl::StrCat(where, failure));
  }
  LOCKSTEP_LOG_INFO("comm", "gloo group '{}': rank {} of {} connected", options.prefix,
                    options.rank, options.world_size);
  return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(options, std::move(context)));
}

GlooCommunicator::GlooCommunicator(const GlooOptions& options,
                                   std::shared_ptr<gloo::Context> context)
    : rank_(options.rank),
      world_size_(options.world_size),
      prefix_(options.prefix),
      context_(std::move(context)) {}

GlooCommunicator::~GlooCommunicator() = default;

absl::Status GlooCommunicator::Run(CollectiveOp op, const CallOptions& options,
                                   absl::FunctionRef<absl::Status(GlooCall&)> body) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("gloo communicator of group '", prefix_, "' rank ", rank_,
                     " is broken by an earlier error: ", broken_.ToString()));
  }
  absl::Status status;
  bool thrown = false;
  bool io_error = false;
  std::string what;
  try {
    GlooCall call(context_, op, options);
    status = body(call);
  } catch (const gloo::IoException& e) {
    thrown = io_error = true;
    what = e.what();
  } catch (const std::exception& e) {
    thrown = true;
    what = e.what();
  } catch (...) {
    thrown = true;
    what = "unknown exception";
  }
  if (thrown) {
    const std::string message = absl::StrCat(DescribeCall(op, options.tag), " on rank ", rank_,
                                             " of gloo group '", prefix_, "': ", what);
    status = !io_error         ? absl::InternalError(message)
             : IsTimeout(what) ? absl::DeadlineExceededError(message)
                               : absl::UnavailableError(message);
  }
  if (!status.ok()) {
    broken_ = status;
    LOCKSTEP_LOG_WARN("comm", "gloo group '{}' rank {} broken: {}", prefix_, rank_,
                      status.ToString());
  }
  return status;
}

absl::Status GlooCommunicator::AllReduce(absl::Span<int64_t> data, ReduceOp op,
                                         const CallOptions& options) {
  const int64_t n = data.size();
  const int64_t fp =
      CallFingerprint(CollectiveOp::kAllReduce, options.tag, {n, static_cast<int64_t>(op)});
  return Run(CollectiveOp::kAllReduce, options, [&](GlooCall& call) -> absl::Status {
    if (n <= kInlineElements) return call.InlineAllReduce(data, op, fp);
    RETURN_IF_ERROR(call.ExchangeHeaders(fp, {}, absl::OkStatus()).status());
    return call.AllReduce(data.data(), n, op);
  });
}

absl::Status GlooCommunicator::Barrier(const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kBarrier, options.tag);
  return Run(CollectiveOp::kBarrier, options,
             [&](GlooCall& call) { return call.InlineAllReduce({}, ReduceOp::kSum, fp); });
}

absl::Status GlooCommunicator::AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                         const CallOptions& options) {
  const int64_t n = in.size();
  const int64_t fp = CallFingerprint(CollectiveOp::kAllGather, options.tag, {n});
  absl::Status local;
  if (out.size() != in.size() * world_size_) {
    local = InvalidCallArgument(
        CollectiveOp::kAllGather, options.tag, rank_,
        absl::StrCat("out has ", out.size(), " elements, expected ", world_size_, " * ", n));
  }
  return Run(CollectiveOp::kAllGather, options, [&](GlooCall& call) -> absl::Status {
    if (n <= kInlineElements) return call.InlineAllGather(in, out, fp, local);
    RETURN_IF_ERROR(call.ExchangeHeaders(fp, {}, local).status());
    return call.AllGather(in.data(), out.data(), n);
  });
}

absl::Status GlooCommunicator::AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
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
  return Run(CollectiveOp::kAllToAll, options, [&](GlooCall& call) -> absl::Status {
    if (n <= kInlineElements) return call.InlineAllToAll(send, recv, fp, local);
    RETURN_IF_ERROR(call.ExchangeHeaders(fp, {}, local).status());
    return call.AllToAll(send.data(), recv.data(), send.size());
  });
}

absl::StatusOr<std::vector<std::string>> GlooCommunicator::AllGatherBytes(
    absl::string_view data, const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kAllGatherBytes, options.tag);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(CollectiveOp::kAllGatherBytes, options, [&](GlooCall& call) -> absl::Status {
    const int64_t size = data.size();
    ASSIGN_OR_RETURN(GlooHeaders headers,
                     call.ExchangeHeaders(fp, {&size, 1}, absl::OkStatus(), data));
    const std::vector<size_t> sizes = headers.column(0);
    if (AllInline(headers, world_size_)) {
      for (int r = 0; r < world_size_; ++r) result.emplace_back(headers.inline_bytes(r));
      return absl::OkStatus();
    }
    size_t total = 0;
    for (size_t s : sizes) total += s;
    std::string flat(total, '\0');
    RETURN_IF_ERROR(call.AllGatherV(data, flat.data(), sizes));
    result = Split(flat, sizes);
    return absl::OkStatus();
  }));
  return result;
}

absl::Status GlooCommunicator::Broadcast(std::string* data, int root, const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kBroadcast, options.tag, {root});
  absl::Status local;
  if (root < 0 || root >= world_size_) {
    local =
        InvalidCallArgument(CollectiveOp::kBroadcast, options.tag, rank_,
                            absl::StrCat("root ", root, " is outside the group of ", world_size_));
  }
  return Run(CollectiveOp::kBroadcast, options, [&](GlooCall& call) -> absl::Status {
    const int64_t size = data->size();
    ASSIGN_OR_RETURN(
        GlooHeaders headers,
        call.ExchangeHeaders(fp, {&size, 1}, local,
                             rank_ == root ? absl::string_view(*data) : absl::string_view()));
    const size_t root_size = headers.field(root, 0);
    if (headers.has_inline(root)) {
      if (rank_ != root) {
        const absl::string_view value = headers.inline_bytes(root);
        data->assign(value.data(), value.size());
      }
      return absl::OkStatus();
    }
    if (rank_ != root) data->assign(root_size, '\0');
    return call.Broadcast(data->data(), root_size, root);
  });
}

absl::StatusOr<std::vector<std::string>> GlooCommunicator::Gather(absl::string_view data, int root,
                                                                  const CallOptions& options) {
  const int64_t fp = CallFingerprint(CollectiveOp::kGather, options.tag, {root});
  absl::Status local;
  if (root < 0 || root >= world_size_) {
    local =
        InvalidCallArgument(CollectiveOp::kGather, options.tag, rank_,
                            absl::StrCat("root ", root, " is outside the group of ", world_size_));
  }
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(CollectiveOp::kGather, options, [&](GlooCall& call) -> absl::Status {
    const int64_t size = data.size();
    ASSIGN_OR_RETURN(GlooHeaders headers, call.ExchangeHeaders(fp, {&size, 1}, local, data));
    const std::vector<size_t> sizes = headers.column(0);
    if (AllInline(headers, world_size_)) {
      if (rank_ == root) {
        for (int r = 0; r < world_size_; ++r) result.emplace_back(headers.inline_bytes(r));
      }
      return absl::OkStatus();
    }
    std::string flat;
    RETURN_IF_ERROR(call.Gather(data, root, sizes, &flat));
    if (rank_ == root) result = Split(flat, sizes);
    return absl::OkStatus();
  }));
  return result;
}

absl::Status GlooCommunicator::AllToAllV(absl::Span<const float> send,
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
  return Run(CollectiveOp::kAllToAllV, options, [&](GlooCall& call) -> absl::Status {
    std::vector<int64_t> fields(2 * world_size_, 0);
    if (local.ok()) {
      std::copy(send_counts.begin(), send_counts.end(), fields.begin());
      std::copy(recv_counts.begin(), recv_counts.end(), fields.begin() + world_size_);
    }
    ASSIGN_OR_RETURN(GlooHeaders headers, call.ExchangeHeaders(fp, fields, local));
    for (int s = 0; s < world_size_; ++s) {
      for (int r = 0; r < world_size_; ++r) {
        const int64_t sent = headers.field(s, r);
        const int64_t expected = headers.field(r, world_size_ + s);
        if (sent != expected) {
          return absl::InternalError(absl::StrCat(
              "collective desync: ", DescribeCall(CollectiveOp::kAllToAllV, options.tag), ": rank ",
              s, " sends ", sent, " floats to rank ", r, ", which expects ", expected));
        }
      }
    }
    return call.AllToAllV(send.data(), std::vector<int64_t>(send_counts.begin(), send_counts.end()),
                          recv.data(),
                          std::vector<int64_t>(recv_counts.begin(), recv_counts.end()));
  });
}

absl::StatusOr<std::vector<std::string>> GlooCommunicator::AllToAllBytes(
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
  RETURN_IF_ERROR(Run(CollectiveOp::kAllToAllBytes, options, [&](GlooCall& call) -> absl::Status {
    std::vector<int64_t> send_sizes(world_size_, 0);
    std::string flat_send;
    if (local.ok()) {
      for (int r = 0; r < world_size_; ++r) {
        send_sizes[r] = send[r].size();
        flat_send += send[r];
      }
    }
    ASSIGN_OR_RETURN(GlooHeaders headers, call.ExchangeHeaders(fp, send_sizes, local));
    std::vector<size_t> recv_sizes = headers.column(rank_);
    std::vector<int64_t> recv_counts(recv_sizes.begin(), recv_sizes.end());
    size_t total = 0;
    for (size_t s : recv_sizes) total += s;
    std::string flat_recv(total, '\0');
    RETURN_IF_ERROR(
        call.AllToAllV(flat_send.data(), send_sizes, flat_recv.data(), std::move(recv_counts)));
    result = Split(flat_recv, recv_sizes);
    return absl::OkStatus();
  }));
  return result;
}

}  // namespace lockstep::comm
