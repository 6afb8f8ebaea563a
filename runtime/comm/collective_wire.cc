#include "runtime/comm/collective_wire.h"

#include <algorithm>
#include <cstring>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"

namespace lockstep::comm {
namespace {

// Word offsets within one rank's header.
constexpr size_t kFp = 0;
constexpr size_t kInfo = 1;
constexpr size_t kArgs = 2;  // 3 words
constexpr size_t kTagLength = 5;
constexpr size_t kTag = 6;  // kWireTagBytes / 8 words
constexpr size_t kFields = kTag + kWireTagBytes / sizeof(int64_t);
size_t InlineLengthAt(int world) { return kFields + 2 * static_cast<size_t>(world); }

absl::string_view OpName(int64_t info) {
  const int64_t code = info & 0xff;
  if (code > static_cast<int64_t>(CollectiveOp::kBarrier)) return "UnknownOp";
  return CollectiveOpName(static_cast<CollectiveOp>(code));
}

// Rank r's call as its header says, for a desync message.
std::string DescribeRow(const int64_t* row) {
  const int64_t code = row[kInfo] & 0xff;
  if (code > static_cast<int64_t>(CollectiveOp::kBarrier)) return "an unknown op";
  const size_t tag_length = std::min<size_t>(static_cast<size_t>(row[kTagLength]), kWireTagBytes);
  const absl::string_view tag(reinterpret_cast<const char*>(row + kTag), tag_length);
  const auto op = static_cast<CollectiveOp>(code);
  return DescribeCallArgs(op, tag, absl::Span<const int64_t>(row + kArgs, CallArgCount(op)));
}

// The agreement check shared by headers and compact blocks.
absl::Status CheckAgreement(const CallSpec& spec, int world, absl::FunctionRef<int64_t(int)> fp_of,
                            absl::FunctionRef<int64_t(int)> info_of,
                            absl::FunctionRef<std::string(int)> describe) {
  for (int r = 1; r < world; ++r) {
    if (fp_of(r) != fp_of(0)) {
      return absl::InternalError(absl::StrCat("collective desync: rank 0 called ", describe(0),
                                              ", rank ", r, " called ", describe(r)));
    }
  }
  if (!spec.local.ok()) return spec.local;
  for (int r = 0; r < world; ++r) {
    if (info_of(r) & kWireInvalidFlag) {
      return InvalidCallArgument(spec.op, spec.tag, r,
                                 "invalid arguments (that rank's error says which)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t WireInfo(const CallSpec& spec) {
  return static_cast<int64_t>(spec.op) | (spec.local.ok() ? 0 : kWireInvalidFlag);
}

size_t WireHeaderWords(int world) {
  return InlineLengthAt(world) + 1 + kWireInlineBytes / sizeof(int64_t);
}

std::vector<int64_t> EncodeWireHeader(const CallSpec& spec, int world,
                                      absl::Span<const int64_t> fields,
                                      absl::string_view inline_data) {
  std::vector<int64_t> mine(WireHeaderWords(world), 0);
  mine[kFp] = spec.fp;
  mine[kInfo] = WireInfo(spec);
  std::copy_n(spec.args, std::min(spec.num_args, 3), mine.begin() + kArgs);
  const size_t tag_length = std::min(spec.tag.size(), kWireTagBytes);
  mine[kTagLength] = static_cast<int64_t>(tag_length);
  if (tag_length > 0) std::memcpy(&mine[kTag], spec.tag.data(), tag_length);
  const size_t length_at = InlineLengthAt(world);
  if (!spec.local.ok()) {
    mine[length_at] = -1;
    return mine;
  }
  std::copy_n(fields.begin(), std::min<size_t>(fields.size(), 2 * static_cast<size_t>(world)),
              mine.begin() + kFields);
  if (inline_data.size() <= kWireInlineBytes) {
    mine[length_at] = static_cast<int64_t>(inline_data.size());
    if (!inline_data.empty()) {
      std::memcpy(&mine[length_at + 1], inline_data.data(), inline_data.size());
    }
  } else {
    mine[length_at] = -1;
  }
  return mine;
}

WireHeaders::WireHeaders(std::vector<int64_t> rows, int world)
    : rows_(std::move(rows)), width_(WireHeaderWords(world)), world_(world) {}

int64_t WireHeaders::field(int r, size_t i) const { return rows_[r * width_ + kFields + i]; }

std::vector<size_t> WireHeaders::column(size_t i) const {
  std::vector<size_t> out(world_);
  for (int r = 0; r < world_; ++r) out[r] = static_cast<size_t>(field(r, i));
  return out;
}

bool WireHeaders::has_inline(int r) const {
  return rows_[r * width_ + InlineLengthAt(world_)] >= 0;
}

absl::string_view WireHeaders::inline_bytes(int r) const {
  const size_t at = r * width_ + InlineLengthAt(world_);
  const int64_t length = rows_[at];
  if (length <= 0) return {};
  return absl::string_view(reinterpret_cast<const char*>(&rows_[at + 1]),
                           static_cast<size_t>(length));
}

bool WireHeaders::all_inline() const {
  for (int r = 0; r < world_; ++r) {
    if (!has_inline(r)) return false;
  }
  return true;
}

absl::StatusOr<WireHeaders> CheckWireHeaders(const CallSpec& spec, int world,
                                             std::vector<int64_t> rows) {
  const size_t width = WireHeaderWords(world);
  if (rows.size() != width * world) {
    return absl::InternalError(
        absl::StrCat("collective wire: ", rows.size(), " header words, expected ", width * world));
  }
  const int64_t* data = rows.data();
  absl::Status status = CheckAgreement(
      spec, world, [&](int r) { return data[r * width + kFp]; },
      [&](int r) { return data[r * width + kInfo]; },
      [&](int r) { return DescribeRow(data + r * width); });
  if (!status.ok()) return status;
  return WireHeaders(std::move(rows), world);
}

absl::Status CheckWireBlocks(const CallSpec& spec, int world, absl::Span<const int64_t> blocks,
                             size_t stride, size_t fp_at) {
  auto fp_of = [&](int r) { return blocks[r * stride + fp_at]; };
  auto info_of = [&](int r) { return blocks[r * stride + fp_at + 1]; };
  return CheckAgreement(spec, world, fp_of, info_of, [&](int r) {
    if (fp_of(r) == spec.fp) return DescribeCall(spec.op, spec.tag);
    return absl::StrCat(OpName(info_of(r)), "(another tag or size)");
  });
}

}  // namespace lockstep::comm
