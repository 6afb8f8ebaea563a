#include "runtime/comm/collective_protocol.h"

#include "absl/strings/str_cat.h"

namespace lockstep::comm {

std::vector<int64_t> AllToAllVFields(const CallSpec& spec, absl::Span<const int64_t> send_counts,
                                     absl::Span<const int64_t> recv_counts) {
  std::vector<int64_t> fields;
  if (!spec.local.ok()) return fields;
  fields.assign(send_counts.begin(), send_counts.end());
  fields.insert(fields.end(), recv_counts.begin(), recv_counts.end());
  return fields;
}

absl::Status CheckAllToAllVFields(const CallSpec& spec, int world, HeaderField field) {
  return CheckAllToAllVPairs(
      spec, world, "floats", [&](int s, int r) { return field(s, r); },
      [&](int r, int s) { return field(r, world + s); });
}

FlatBlocks FlattenAllToAllBytes(const CallSpec& spec, int rank,
                                const std::vector<std::string>& send) {
  FlatBlocks blocks;
  if (!spec.local.ok()) return blocks;
  for (size_t r = 0; r < send.size(); ++r) {
    if (static_cast<int>(r) == rank) blocks.own_offset = blocks.flat.size();
    blocks.sizes.push_back(send[r].size());
    blocks.flat += send[r];
  }
  return blocks;
}

int64_t BlockOffset(HeaderField field, int s, int r) {
  int64_t offset = 0;
  for (int q = 0; q < r; ++q) offset += field(s, q);
  return offset;
}

std::vector<std::string> SplitBytes(absl::string_view flat, absl::Span<const size_t> sizes) {
  std::vector<std::string> out;
  out.reserve(sizes.size());
  size_t offset = 0;
  for (size_t size : sizes) {
    out.emplace_back(flat.substr(offset, size));
    offset += size;
  }
  return out;
}

absl::Status FirstError::CheckUsable(absl::string_view who) const {
  if (first_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(who, " is broken by an earlier error: ", first_.ToString()));
}

bool FirstError::Record(const absl::Status& status) {
  if (status.ok() || !first_.ok()) return false;
  first_ = status;
  return true;
}

}  // namespace lockstep::comm
