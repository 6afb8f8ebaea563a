#include "runtime/comm/gloo_call.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "gloo/allgather.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/broadcast.h"
#include "gloo/context.h"
#include "gloo/math.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace lockstep::comm::internal {
namespace {

// gloo tags (0 is left for raw calls on GlooCommunicator::gloo_context()). Every header exchange
// uses one tag, so that two ranks calling different ops meet there and see the desync; each inline
// path has its own; payloads are tagged by op. Exchanges on one tag always have the same size
// within a group. Calls on different tags never meet (they time out instead), and no payload is
// sent before its size is agreed: gloo aborts the process when a peer sends more bytes than a
// receive expects.
constexpr uint32_t kHeaderTag = 1;
constexpr uint32_t kInlineAllReduceTag = 2;  // AllReduce and Barrier.
constexpr uint32_t kInlineAllGatherTag = 3;
constexpr uint32_t kInlineAllToAllTag = 4;
uint32_t PayloadTag(CollectiveOp op) { return 16 + static_cast<uint32_t>(op); }

// Inline block: kInline values, then the fingerprint and the info word.
constexpr int64_t kInline = kGlooInlineElements;
constexpr int64_t kInlineBlock = kInline + 2;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);
ReduceFn ReduceFunction(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &gloo::sum<int64_t>;
    case ReduceOp::kMin:
      return &gloo::min<int64_t>;
    case ReduceOp::kMax:
      return &gloo::max<int64_t>;
  }
  return &gloo::sum<int64_t>;
}

// The inline all-reduce block, reduced as one gloo element: the values with the
// call's op, and the lowest and highest fingerprint of all ranks (equal iff they agree).
struct InlineBlock {
  int64_t values[kInline];
  int64_t fp_low;
  int64_t fp_high;
};
static_assert(sizeof(InlineBlock) == kInlineBlock * sizeof(int64_t));

template <ReduceOp kOp>
int64_t Combine(int64_t a, int64_t b) {
  if constexpr (kOp == ReduceOp::kSum) {
    // Two's complement wrap-around, as gloo's sum does, without signed overflow.
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else if constexpr (kOp == ReduceOp::kMin) {
    return std::min(a, b);
  } else {
    return std::max(a, b);
  }
}

template <ReduceOp kOp>
void ReduceBlocks(void* out, const void* in_a, const void* in_b, size_t n) {
  auto* c = static_cast<InlineBlock*>(out);
  const auto* a = static_cast<const InlineBlock*>(in_a);
  const auto* b = static_cast<const InlineBlock*>(in_b);
  for (size_t k = 0; k < n; ++k) {
    for (int64_t i = 0; i < kInline; ++i) {
      c[k].values[i] = Combine<kOp>(a[k].values[i], b[k].values[i]);
    }
    c[k].fp_low = std::min(a[k].fp_low, b[k].fp_low);
    c[k].fp_high = std::max(a[k].fp_high, b[k].fp_high);
  }
}

ReduceFn ReduceBlocksFunction(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &ReduceBlocks<ReduceOp::kSum>;
    case ReduceOp::kMin:
      return &ReduceBlocks<ReduceOp::kMin>;
    case ReduceOp::kMax:
      return &ReduceBlocks<ReduceOp::kMax>;
  }
  return &ReduceBlocks<ReduceOp::kSum>;
}

// A gloo element of kWords words. Small exchanges (headers, inline gathers) run as an
// all-reduce of a world x width block in which each rank fills its own row: with the
// block in one or a few elements, gloo's ring moves one or a few segments, which on a
// loaded host is much faster than gloo's allgather (2 * (world - 1) waits).
template <size_t kWords>
struct Words {
  uint64_t words[kWords];
};

template <size_t kWords>
void SumWords(void* out, const void* in_a, const void* in_b, size_t n) {
  auto* c = static_cast<uint64_t*>(out);
  const auto* a = static_cast<const uint64_t*>(in_a);
  const auto* b = static_cast<const uint64_t*>(in_b);
  for (size_t i = 0; i < n * kWords; ++i) c[i] = a[i] + b[i];
}

template <size_t kWords>
void AllReduceWords(const std::shared_ptr<gloo::Context>& context, std::vector<uint64_t>& block,
                    uint32_t tag, std::chrono::milliseconds timeout) {
  block.resize((block.size() + kWords - 1) / kWords * kWords, 0);
  gloo::AllreduceOptions opts(context);
  opts.setOutput(reinterpret_cast<Words<kWords>*>(block.data()), block.size() / kWords);
  opts.setReduceFunction(&SumWords<kWords>);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

// gloo wants a buffer address even for zero bytes.
template <typename T>
T* NonNull(const T* ptr) {
  static T dummy{};
  return ptr != nullptr ? const_cast<T*>(ptr) : &dummy;
}

}  // namespace

GlooCall::GlooCall(const std::shared_ptr<gloo::Context>& context, CollectiveOp op,
                   const CallOptions& options)
    : context_(context),
      op_(op),
      tag_(options.tag),
      timeout_(options.timeout),
      deadline_(absl::Now() + options.timeout) {}

int GlooCall::rank() const { return context_->rank; }
int GlooCall::world() const { return context_->size; }

absl::StatusOr<std::chrono::milliseconds> GlooCall::Remaining() const {
  const absl::Duration left = deadline_ - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(
        absl::StrCat(DescribeCall(op_, tag_), " on rank ", rank(), " timed out after ",
                     absl::FormatDuration(timeout_), " between rounds"));
  }
  return std::max(absl::ToChronoMilliseconds(left), std::chrono::milliseconds(1));
}

absl::Status GlooCall::InlineAllReduce(absl::Span<int64_t> data, ReduceOp reduce,
                                       const CallSpec& spec) {
  const int64_t fp = spec.fp;
  InlineBlock block = {};
  std::copy(data.begin(), data.end(), block.values);
  block.fp_low = fp;
  block.fp_high = fp;
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  // One element of sizeof(InlineBlock) bytes: gloo's ring then moves a single segment,
  // as for a one-int64 all-reduce, and the reduction sees the whole block.
  gloo::AllreduceOptions opts(context_);
  opts.setOutput(&block, 1);
  opts.setReduceFunction(ReduceBlocksFunction(reduce));
  opts.setTag(kInlineAllReduceTag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
  if (block.fp_low != fp || block.fp_high != fp) {
    return absl::InternalError(
        absl::StrCat("collective desync: ", DescribeCall(op_, tag_), " (", data.size(),
                     " elements, ", ReduceOpName(reduce), ") on rank ", rank(),
                     " does not match the call of at least one peer (another op, tag or size)"));
  }
  std::copy(block.values, block.values + data.size(), data.begin());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> GlooCall::GatherRows(absl::Span<const int64_t> mine,
                                                          uint32_t tag) {
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  const size_t width = mine.size();
  std::vector<uint64_t> block(width * world(), 0);
  std::copy(mine.begin(), mine.end(), block.begin() + rank() * width);
  // Every rank computes the same size, hence the same element type: the smallest that
  // holds the block (so one segment), or several of the largest.
  if (block.size() <= 64) {
    AllReduceWords<64>(context_, block, tag, timeout);
  } else if (block.size() <= 128) {
    AllReduceWords<128>(context_, block, tag, timeout);
  } else if (block.size() <= 256) {
    AllReduceWords<256>(context_, block, tag, timeout);
  } else if (block.size() <= 512) {
    AllReduceWords<512>(context_, block, tag, timeout);
  } else if (block.size() <= 1024) {
    AllReduceWords<1024>(context_, block, tag, timeout);
  } else {
    AllReduceWords<4096>(context_, block, tag, timeout);
  }
  return std::vector<int64_t>(block.begin(), block.begin() + width * world());
}

absl::Status GlooCall::InlineAllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                       const CallSpec& spec) {
  int64_t mine[kInlineBlock] = {};
  std::copy(in.begin(), in.end(), mine);
  mine[kInline] = spec.fp;
  mine[kInline + 1] = WireInfo(spec);
  ASSIGN_OR_RETURN(std::vector<int64_t> all, GatherRows(mine, kInlineAllGatherTag));
  RETURN_IF_ERROR(CheckWireBlocks(spec, world(), all, kInlineBlock, kInline));
  const size_t n = in.size();
  for (int r = 0; r < world(); ++r) {
    std::copy_n(all.begin() + r * kInlineBlock, n, out.begin() + r * n);
  }
  return absl::OkStatus();
}

absl::Status GlooCall::InlineAllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                                      const CallSpec& spec) {
  // Each rank's row: its blocks for every rank (kInline each), its fingerprint, info.
  const size_t n = send.size() / world();
  const size_t width = kInline * world() + 2;
  std::vector<int64_t> mine(width, 0);
  if (spec.local.ok()) {
    for (int r = 0; r < world(); ++r) {
      std::copy_n(send.begin() + r * n, n, mine.begin() + r * kInline);
    }
  }
  mine[width - 2] = spec.fp;
  mine[width - 1] = WireInfo(spec);
  ASSIGN_OR_RETURN(std::vector<int64_t> all, GatherRows(mine, kInlineAllToAllTag));
  RETURN_IF_ERROR(CheckWireBlocks(spec, world(), all, width, width - 2));
  for (int s = 0; s < world(); ++s) {
    std::copy_n(all.begin() + s * width + rank() * kInline, n, recv.begin() + s * n);
  }
  return absl::OkStatus();
}

absl::StatusOr<WireHeaders> GlooCall::ExchangeHeaders(const CallSpec& spec,
                                                      absl::Span<const int64_t> fields,
                                                      absl::string_view inline_data) {
  const std::vector<int64_t> mine = EncodeWireHeader(spec, world(), fields, inline_data);
  ASSIGN_OR_RETURN(std::vector<int64_t> all, GatherRows(mine, kHeaderTag));
  return CheckWireHeaders(spec, world(), std::move(all));
}

absl::Status GlooCall::AllReduce(int64_t* data, size_t n, ReduceOp reduce) {
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  gloo::AllreduceOptions opts(context_);
  opts.setOutput(data, n);
  opts.setReduceFunction(ReduceFunction(reduce));
  opts.setTag(PayloadTag(op_));
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
  return absl::OkStatus();
}

absl::Status GlooCall::AllGather(const int64_t* in, int64_t* out, size_t per_rank) {
  return AllGatherRaw(in, out, per_rank, PayloadTag(op_));
}

absl::Status GlooCall::AllGatherRaw(const int64_t* in, int64_t* out, size_t per_rank,
                                    uint32_t tag) {
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  gloo::AllgatherOptions opts(context_);
  opts.setInput(NonNull(in), per_rank);
  opts.setOutput(NonNull(out), per_rank * world());
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allgather(opts);
  return absl::OkStatus();
}

absl::Status GlooCall::AllToAll(const int64_t* in, int64_t* out, size_t total) {
  return AllToAllRaw(in, out, total, PayloadTag(op_));
}

absl::Status GlooCall::AllToAllRaw(const int64_t* in, int64_t* out, size_t total, uint32_t tag) {
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  gloo::AlltoallOptions opts(context_);
  opts.setInput(NonNull(in), total);
  opts.setOutput(NonNull(out), total);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::alltoall(opts);
  return absl::OkStatus();
}

template <typename T>
absl::Status GlooCall::AllToAllVRaw(const T* in, std::vector<int64_t> in_counts, T* out,
                                    std::vector<int64_t> out_counts) {
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  gloo::AlltoallvOptions opts(context_);
  opts.setInput(NonNull(in), std::move(in_counts));
  opts.setOutput(NonNull(out), std::move(out_counts));
  opts.setTag(PayloadTag(op_));
  opts.setTimeout(timeout);
  gloo::alltoallv(opts);
  return absl::OkStatus();
}

absl::Status GlooCall::AllToAllV(const float* in, std::vector<int64_t> in_counts, float* out,
                                 std::vector<int64_t> out_counts) {
  return AllToAllVRaw(in, std::move(in_counts), out, std::move(out_counts));
}

absl::Status GlooCall::AllToAllV(const char* in, std::vector<int64_t> in_counts, char* out,
                                 std::vector<int64_t> out_counts) {
  return AllToAllVRaw(in, std::move(in_counts), out, std::move(out_counts));
}

absl::Status GlooCall::AllGatherV(absl::string_view in, char* out, std::vector<size_t> sizes) {
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  gloo::AllgathervOptions opts(context_);
  opts.setInput(NonNull(in.data()), in.size());
  opts.setOutput(NonNull(out), std::move(sizes));
  opts.setTag(PayloadTag(op_));
  opts.setTimeout(timeout);
  gloo::allgatherv(opts);
  return absl::OkStatus();
}

absl::Status GlooCall::Broadcast(char* data, size_t size, int root) {
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  gloo::BroadcastOptions opts(context_);
  opts.setOutput(data, size);
  opts.setRoot(root);
  opts.setTag(PayloadTag(op_));
  opts.setTimeout(timeout);
  gloo::broadcast(opts);
  return absl::OkStatus();
}

absl::Status GlooCall::Gather(absl::string_view in, int root, const std::vector<size_t>& sizes,
                              std::string* out) {
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, Remaining());
  const uint64_t slot = gloo::Slot::build(gloo::kGatherSlotPrefix, PayloadTag(op_));
  if (rank() != root) {
    if (in.empty()) return absl::OkStatus();
    auto buffer = context_->createUnboundBuffer(NonNull(in.data()), in.size());
    buffer->send(root, slot);
    if (!buffer->waitSend(timeout)) return absl::AbortedError("gloo send aborted");
    return absl::OkStatus();
  }
  size_t total = 0;
  for (size_t size : sizes) total += size;
  out->assign(total, '\0');
  auto buffer = context_->createUnboundBuffer(NonNull(out->data()), total);
  size_t offset = 0;
  int pending = 0;
  for (int r = 0; r < world(); ++r) {
    if (r == root) {
      if (!in.empty()) std::memcpy(out->data() + offset, in.data(), in.size());
    } else if (sizes[r] > 0) {
      buffer->recv(r, slot, offset, sizes[r]);
      ++pending;
    }
    offset += sizes[r];
  }
  for (int i = 0; i < pending; ++i) {
    if (!buffer->waitRecv(timeout)) return absl::AbortedError("gloo receive aborted");
  }
  return absl::OkStatus();
}

}  // namespace lockstep::comm::internal
