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
#include "runtime/comm/collective_protocol.h"
#include "runtime/comm/collective_wire.h"
#include "runtime/comm/gloo_call.h"

namespace lockstep::comm {

using internal::GlooCall;

namespace {

bool IsTimeout(absl::string_view what) {
  return absl::StrContains(what, "Timed out") || absl::StrContains(what, "timeout") ||
         absl::StrContains(what, "Timeout");
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

absl::Status GlooCommunicator::Run(const CallSpec& spec, const CallOptions& options,
                                   absl::FunctionRef<absl::Status(GlooCall&)> body) {
  const CollectiveOp op = spec.op;
  RETURN_IF_ERROR(
      broken_.CheckUsable(absl::StrCat("gloo communicator of group '", prefix_, "' rank ", rank_)));
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
  if (broken_.Record(status)) {
    LOCKSTEP_LOG_WARN("comm", "gloo group '{}' rank {} broken: {}", prefix_, rank_,
                      status.ToString());
  }
  return status;
}

absl::Status GlooCommunicator::AllReduce(absl::Span<int64_t> data, ReduceOp op,
                                         const CallOptions& options) {
  const CallSpec spec = SpecAllReduce(options.tag, data.size(), op);
  return Run(spec, options, [&](GlooCall& call) -> absl::Status {
    if (data.size() <= kInlineElements) return call.InlineAllReduce(data, op, spec);
    RETURN_IF_ERROR(call.ExchangeHeaders(spec, {}).status());
    return call.AllReduce(data.data(), data.size(), op);
  });
}

absl::Status GlooCommunicator::Barrier(const CallOptions& options) {
  const CallSpec spec = SpecBarrier(options.tag);
  return Run(spec, options,
             [&](GlooCall& call) { return call.InlineAllReduce({}, ReduceOp::kSum, spec); });
}

absl::Status GlooCommunicator::AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                         const CallOptions& options) {
  const CallSpec spec = SpecAllGather(options.tag, rank_, world_size_, in.size(), out.size());
  return Run(spec, options, [&](GlooCall& call) -> absl::Status {
    if (in.size() <= kInlineElements) return call.InlineAllGather(in, out, spec);
    RETURN_IF_ERROR(call.ExchangeHeaders(spec, {}).status());
    return call.AllGather(in.data(), out.data(), in.size());
  });
}

absl::Status GlooCommunicator::AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                                        const CallOptions& options) {
  const CallSpec spec = SpecAllToAll(options.tag, rank_, world_size_, send.size(), recv.size());
  return Run(spec, options, [&](GlooCall& call) -> absl::Status {
    if (spec.args[0] <= kInlineElements) return call.InlineAllToAll(send, recv, spec);
    RETURN_IF_ERROR(call.ExchangeHeaders(spec, {}).status());
    return call.AllToAll(send.data(), recv.data(), send.size());
  });
}

absl::StatusOr<std::vector<std::string>> GlooCommunicator::AllGatherBytes(
    absl::string_view data, const CallOptions& options) {
  const CallSpec spec = SpecAllGatherBytes(options.tag);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](GlooCall& call) -> absl::Status {
    const int64_t size = data.size();
    ASSIGN_OR_RETURN(WireHeaders headers, call.ExchangeHeaders(spec, {&size, 1}, data));
    const std::vector<size_t> sizes = headers.column(0);
    if (headers.all_inline()) {
      for (int r = 0; r < world_size_; ++r) result.emplace_back(headers.inline_bytes(r));
      return absl::OkStatus();
    }
    size_t total = 0;
    for (size_t s : sizes) total += s;
    std::string flat(total, '\0');
    RETURN_IF_ERROR(call.AllGatherV(data, flat.data(), sizes));
    result = SplitBytes(flat, sizes);
    return absl::OkStatus();
  }));
  return result;
}

absl::Status GlooCommunicator::Broadcast(std::string* data, int root, const CallOptions& options) {
  const CallSpec spec = SpecRooted(CollectiveOp::kBroadcast, options.tag, rank_, world_size_, root);
  return Run(spec, options, [&](GlooCall& call) -> absl::Status {
    const int64_t size = data->size();
    ASSIGN_OR_RETURN(
        WireHeaders headers,
        call.ExchangeHeaders(spec, {&size, 1},
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
  const CallSpec spec = SpecRooted(CollectiveOp::kGather, options.tag, rank_, world_size_, root);
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](GlooCall& call) -> absl::Status {
    const int64_t size = data.size();
    ASSIGN_OR_RETURN(WireHeaders headers, call.ExchangeHeaders(spec, {&size, 1}, data));
    const std::vector<size_t> sizes = headers.column(0);
    if (headers.all_inline()) {
      if (rank_ == root) {
        for (int r = 0; r < world_size_; ++r) result.emplace_back(headers.inline_bytes(r));
      }
      return absl::OkStatus();
    }
    std::string flat;
    RETURN_IF_ERROR(call.Gather(data, root, sizes, &flat));
    if (rank_ == root) result = SplitBytes(flat, sizes);
    return absl::OkStatus();
  }));
  return result;
}

absl::Status GlooCommunicator::AllToAllV(absl::Span<const float> send,
                                         absl::Span<const int64_t> send_counts,
                                         absl::Span<float> recv,
                                         absl::Span<const int64_t> recv_counts,
                                         const CallOptions& options) {
  const CallSpec spec = SpecAllToAllV(options.tag, rank_, world_size_, send_counts, send.size(),
                                      recv_counts, recv.size());
  return Run(spec, options, [&](GlooCall& call) -> absl::Status {
    ASSIGN_OR_RETURN(WireHeaders headers,
                     call.ExchangeHeaders(spec, AllToAllVFields(spec, send_counts, recv_counts)));
    RETURN_IF_ERROR(CheckAllToAllVFields(
        spec, world_size_, [&](int r, int i) { return headers.field(r, i); }));
    return call.AllToAllV(send.data(), std::vector<int64_t>(send_counts.begin(), send_counts.end()),
                          recv.data(),
                          std::vector<int64_t>(recv_counts.begin(), recv_counts.end()));
  });
}

absl::StatusOr<std::vector<std::string>> GlooCommunicator::AllToAllBytes(
    const std::vector<std::string>& send, const CallOptions& options) {
  const CallSpec spec = SpecAllToAllBytes(options.tag, rank_, world_size_, send.size());
  std::vector<std::string> result;
  RETURN_IF_ERROR(Run(spec, options, [&](GlooCall& call) -> absl::Status {
    FlatBlocks mine = FlattenAllToAllBytes(spec, rank_, send);
    ASSIGN_OR_RETURN(WireHeaders headers, call.ExchangeHeaders(spec, mine.sizes));
    std::vector<size_t> recv_sizes = headers.column(rank_);
    std::vector<int64_t> recv_counts(recv_sizes.begin(), recv_sizes.end());
    size_t total = 0;
    for (size_t s : recv_sizes) total += s;
    std::string flat_recv(total, '\0');
    RETURN_IF_ERROR(
        call.AllToAllV(mine.flat.data(), mine.sizes, flat_recv.data(), std::move(recv_counts)));
    result = SplitBytes(flat_recv, recv_sizes);
    return absl::OkStatus();
  }));
  return result;
}

}  // namespace lockstep::comm
