// The transport-independent header protocol of the communicators whose ranks cannot
// compare their calls directly (gloo, NCCL): before any payload moves, every rank
// all-gathers one fixed-size header that says which call it is in (fingerprint, op,
// tag, the arguments that must agree), whether its own arguments were valid, up to
// 2 * world int64 fields (sizes or per-peer counts) and, when it fits, the payload
// itself (kWireInlineBytes). Every rank then checks every header the same way, so all
// reach the same verdict:
//  * another op, tag or argument on any rank: Internal("collective desync: rank 0
//    called AllReduce('vote') with 4 elements (sum), rank 2 called Gather('responses')
//    with root 0");
//  * a rank's invalid arguments: InvalidArgument naming that rank (its own error on
//    the rank itself).
// Only then do sizes agree, so the payload rounds can use exact sizes: gloo aborts the
// process on an oversized receive and NCCL hangs or corrupts memory on mismatched
// counts, instead of failing.
//
//   std::vector<int64_t> mine = EncodeWireHeader(spec, world, fields, inline_data);
//   ... all-gather `mine` from every rank into `rows` (world * WireHeaderWords(world)) ...
//   ASSIGN_OR_RETURN(WireHeaders headers, CheckWireHeaders(spec, world, std::move(rows)));
//
// Thread safety: plain values and functions.
#ifndef LOCKSTEP_RUNTIME_COMM_COLLECTIVE_WIRE_H_
#define LOCKSTEP_RUNTIME_COMM_COLLECTIVE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_op.h"

namespace lockstep::comm {

// Payload bytes a header carries, so that the step's small variable-size ops (the
// intake broadcast, the response gather, the vote) finish in the header round.
inline constexpr size_t kWireInlineBytes = 256;
// Tag bytes a header carries for error messages (the fingerprint covers the whole tag).
inline constexpr size_t kWireTagBytes = 32;

// The info word: the op, and whether the rank's own arguments were invalid.
inline constexpr int64_t kWireInvalidFlag = 1 << 8;
int64_t WireInfo(const CallSpec& spec);

// Int64 words per rank of a header in a group of `world` ranks: fingerprint, info, 3
// arguments, the tag (length and kWireTagBytes), 2 * world fields, the inline length
// (-1: the payload did not fit) and kWireInlineBytes.
size_t WireHeaderWords(int world);

// This rank's header. At most 2 * world `fields` are kept; `inline_data` travels only
// if it fits kWireInlineBytes. A rank whose arguments are invalid (spec.local) sends
// no fields and no data.
std::vector<int64_t> EncodeWireHeader(const CallSpec& spec, int world,
                                      absl::Span<const int64_t> fields,
                                      absl::string_view inline_data = {});

// Every rank's header after a successful check.
class WireHeaders {
 public:
  WireHeaders(std::vector<int64_t> rows, int world);

  // Field i of rank r's header.
  int64_t field(int r, size_t i) const;
  // Field i of every rank, as sizes.
  std::vector<size_t> column(size_t i) const;
  // Whether rank r's data travelled in its header, and those bytes (else empty).
  bool has_inline(int r) const;
  absl::string_view inline_bytes(int r) const;
  // Whether every rank's data travelled in its header.
  bool all_inline() const;

 private:
  std::vector<int64_t> rows_;
  size_t width_;
  int world_;
};

// Checks the headers of every rank (`rows`: rank r's WireHeaderWords(world) words at
// r * WireHeaderWords(world)) against this rank's call `spec`, as the file comment
// says: the first desync, then spec.local, then any other rank's invalid arguments.
absl::StatusOr<WireHeaders> CheckWireHeaders(const CallSpec& spec, int world,
                                             std::vector<int64_t> rows);

// The same check over compact blocks that carry only (fingerprint, info) at word
// `fp_at` of each rank's `stride` words (gloo's one-round fixed-size ops). A desync
// names the peer's op but not its tag or arguments.
absl::Status CheckWireBlocks(const CallSpec& spec, int world, absl::Span<const int64_t> blocks,
                             size_t stride, size_t fp_at);

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_COLLECTIVE_WIRE_H_
