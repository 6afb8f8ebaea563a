#include "runtime/comm/shm_call.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/comm/shm_direct.h"

namespace lockstep::comm::internal {
namespace {

// "AllReduce('vote') with 4 elements (max)": what a rank's round header says it called.
std::string DescribeHeader(const ShmRoundHeader& h) {
  const int64_t code = h.info & 0xff;
  if (code > static_cast<int64_t>(CollectiveOp::kBarrier)) return "an unknown op";
  const auto op = static_cast<CollectiveOp>(code);
  const absl::string_view tag(h.tag, std::min<size_t>(h.tag_length, kShmTagBytes));
  if (h.round != 0) return absl::StrCat("round ", h.round, " of ", DescribeCall(op, tag));
  return DescribeCallArgs(op, tag,
                          absl::Span<const int64_t>(h.args, std::clamp<int64_t>(h.num_args, 0, 3)));
}

}  // namespace

ShmCall::ShmCall(ShmGroup& group, CollectiveOp op, const CallOptions& options)
    : group_(group),
      segment_(group.segment()),
      op_(op),
      tag_(options.tag),
      timeout_(options.timeout),
      deadline_(absl::Now() + options.timeout),
      chunk_(static_cast<int64_t>(group.segment().layout().chunk_bytes)) {}

void ShmCall::WriteHeader(uint64_t parity, int64_t round, absl::Span<const int64_t> args) {
  ShmRoundHeader& h = segment_.round_header(group_.rank(), parity);
  h.fp = fp_;
  h.info = info_;
  h.round = round;
  h.payload_bytes = static_cast<int64_t>(payload_.size());
  h.num_args = std::min<int64_t>(args.size(), 3);
  std::copy_n(args.begin(), h.num_args, h.args);
  h.tag_length = static_cast<uint32_t>(std::min(tag_.size(), kShmTagBytes));
  std::memcpy(h.tag, tag_.data(), h.tag_length);
}

void ShmCall::CopyIn(uint64_t parity, int64_t begin) {
  const int64_t end = std::min<int64_t>(payload_.size(), begin + chunk_);
  char* const dst = segment_.data(group_.rank(), parity);
  auto copy = [&](int64_t from, int64_t to) {
    if (from < to) std::memcpy(dst + (from - begin), payload_.data() + from, to - from);
  };
  copy(begin, std::min(end, private_begin_));
  copy(std::max(begin, private_end_), end);
}

absl::Status ShmCall::PublishAndWait(ShmGroup::Wait wait) {
  group_.Publish();
  absl::Status status = group_.WaitForRound(deadline_, wait);
  if (status.ok()) return status;
  std::string message = absl::StrCat(DescribeCall(op_, tag_), " on rank ", group_.rank(),
                                     " of shm group '", group_.name(), "': ", status.message());
  if (absl::IsDeadlineExceeded(status)) {
    absl::StrAppend(&message, " within ", absl::FormatDuration(timeout_));
  }
  return absl::Status(status.code(), message);
}

absl::Status ShmCall::Desync(int a, int b, uint64_t parity) const {
  return absl::InternalError(absl::StrCat(
      "collective desync: rank ", a, " called ", DescribeHeader(segment_.round_header(a, parity)),
      ", rank ", b, " called ", DescribeHeader(segment_.round_header(b, parity))));
}

absl::Status ShmCall::Start(const CallSpec& spec, absl::Span<const int64_t> fields,
                            absl::string_view payload, bool allow_direct, int64_t private_offset,
                            int64_t private_length) {
  const int world = group_.world();
  const int rank = group_.rank();
  const absl::Status& local = spec.local;
  fp_ = spec.fp;
  payload_ = local.ok() ? payload : absl::string_view();
  // A direct payload stays where it is; peers read it in place if the call goes
  // direct, which it does whenever any rank's payload is direct.
  const bool direct_payload = allow_direct && group_.direct() &&
                              static_cast<int64_t>(payload_.size()) >=
                                  std::max<int64_t>(1, group_.options().direct_min_bytes);
  info_ = static_cast<int64_t>(op_) | (local.ok() ? 0 : kShmInvalidFlag) |
          (direct_payload ? kShmDirectFlag : 0);
  round0_parity_ = group_.parity();
  WriteHeader(round0_parity_, 0, spec.arg_span());
  segment_.round_header(rank, round0_parity_).payload_address =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(payload_.data()));
  if (local.ok()) {
    std::copy_n(fields.begin(), std::min<size_t>(fields.size(), 2 * world),
                segment_.fields(rank, round0_parity_));
  }
  private_begin_ = private_offset;
  private_end_ = private_offset + private_length;
  if (!direct_payload) CopyIn(round0_parity_, 0);
  if (absl::Status status = PublishAndWait(); !status.ok()) return status;

  const ShmRoundHeader& h0 = segment_.round_header(0, round0_parity_);
  for (int r = 0; r < world; ++r) {
    const ShmRoundHeader& h = segment_.round_header(r, round0_parity_);
    if (h.fp != h0.fp || h.round != 0 || h0.round != 0) {
      return Desync(0, r == 0 ? 1 : r, round0_parity_);
    }
  }
  if (!local.ok()) return local;
  int64_t longest = 0;
  fields_.resize(world);
  sizes_.resize(world);
  for (int r = 0; r < world; ++r) {
    const ShmRoundHeader& h = segment_.round_header(r, round0_parity_);
    if (h.info & kShmInvalidFlag) {
      return InvalidCallArgument(op_, tag_, r, "invalid arguments (that rank's error says which)");
    }
    fields_[r] = segment_.fields(r, round0_parity_);
    sizes_[r] = h.payload_bytes;
    longest = std::max(longest, h.payload_bytes);
    direct_ = direct_ || (h.info & kShmDirectFlag) != 0;
  }
  rounds_ = direct_ ? 2 : std::max<int64_t>(1, (longest + chunk_ - 1) / chunk_);
  return absl::OkStatus();
}

absl::Status ShmCall::NextRound(int64_t round, int64_t begin, uint64_t* parity,
                                ShmGroup::Wait wait) {
  *parity = group_.parity();
  WriteHeader(*parity, round, {});
  if (!direct_) CopyIn(*parity, begin);
  if (absl::Status status = PublishAndWait(wait); !status.ok()) return status;
  for (int r = 0; r < group_.world(); ++r) {
    const ShmRoundHeader& h = segment_.round_header(r, *parity);
    if (h.fp != fp_ || h.round != round) return Desync(group_.rank(), r, *parity);
  }
  return absl::OkStatus();
}

absl::Status ShmCall::TransferDirect(absl::Span<const Read> reads) {
  const int rank = group_.rank();
  absl::Status read_status;
  int failed_peer = -1;
  for (const Read& read : reads) {
    const int64_t length = std::min(read.length, sizes_[read.from] - read.offset);
    if (length <= 0) continue;
    if (read.from == rank) {
      // memmove: an all-gather's input may be its own block of the output.
      std::memmove(read.dst, payload_.data() + read.offset, length);
      continue;
    }
    const auto address = static_cast<uint64_t>(
        segment_.round_header(read.from, round0_parity_).payload_address + read.offset);
    read_status = ReadPeerMemory(group_.pid(read.from), address, read.dst, length);
    if (!read_status.ok()) {
      failed_peer = read.from;
      break;
    }
  }
  if (!read_status.ok()) {
    // Most likely the peer died under the read: say so, as a wait would.
    absl::Status gone = absl::IsUnavailable(read_status) ? group_.NotePeerExited(failed_peer)
                                                         : group_.CheckPeer(failed_peer);
    if (!gone.ok()) {
      return absl::UnavailableError(absl::StrCat(DescribeCall(op_, tag_), " on rank ", rank,
                                                 " of shm group '", group_.name(),
                                                 "': ", gone.message()));
    }
    return absl::InternalError(absl::StrCat(DescribeCall(op_, tag_), " on rank ", rank,
                                            " of shm group '", group_.name(),
                                            "': direct read failed: ", read_status.message()));
  }
  // Every receiver is done with every sender's buffer once all publish this round;
  // the slowest may still be copying its share of a bulk payload.
  uint64_t parity = 0;
  return NextRound(1, 0, &parity, ShmGroup::Wait::kLong);
}

absl::Status ShmCall::Transfer(ChunkFn consume) {
  if (direct_) return absl::InternalError("a direct shm call must use Transfer(reads)");
  const int world = group_.world();
  chunks_.resize(world);
  for (int64_t round = 0; round < rounds_; ++round) {
    const int64_t begin = round * chunk_;
    uint64_t parity = round0_parity_;
    if (round > 0) {
      if (absl::Status status = NextRound(round, begin, &parity); !status.ok()) return status;
    }
    for (int r = 0; r < world; ++r) chunks_[r] = segment_.data(r, parity);
    consume(begin, chunks_);
  }
  return absl::OkStatus();
}

absl::Status ShmCall::Transfer(absl::Span<const Read> reads) {
  if (direct_) return TransferDirect(reads);
  const int rank = group_.rank();
  return Transfer([&](int64_t begin, absl::Span<const char* const> chunks) {
    for (const Read& read : reads) {
      const int64_t end = std::min({read.offset + read.length, begin + chunk_, sizes_[read.from]});
      const int64_t start = std::max(read.offset, begin);
      if (start >= end) continue;
      const char* src =
          read.from == rank ? payload_.data() + start : chunks[read.from] + (start - begin);
      std::memmove(read.dst + (start - read.offset), src, end - start);  // See TransferDirect.
    }
  });
}

}  // namespace lockstep::comm::internal
