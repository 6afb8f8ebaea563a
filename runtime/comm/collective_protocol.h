// The per-operation protocol of the communicators whose ranks are separate processes
// (GlooCommunicator, ShmCommunicator, NcclCommunicator), described once here; each
// transport's header says only how it moves the rounds.
//
// One call, on every rank (the contract itself is communicator.h's):
//  1. Describe. The call's CallSpec (collective_op.h): op, tag, the arguments that must
//     agree, their fingerprint, and this rank's own argument error (spec.local).
//  2. Header round. Every rank publishes its header (fingerprint, op, tag, arguments,
//     the op's header fields below, and, where the transport can, a small payload) and
//     reads every peer's. A rank with invalid arguments still takes part, without
//     fields or payload, so that every peer learns of it.
//  3. Check, the same way on every rank, so all reach the same verdict: another op, tag
//     or argument on any rank is Internal("collective desync: rank 0 called
//     AllReduce('vote') with 4 elements (sum), rank 2 called Gather('responses') with
//     root 0"); then this rank's own invalid arguments (spec.local); then any other
//     rank's, InvalidArgument naming that rank; then the op's own check below.
//  4. Payload rounds, with sizes every rank now agrees on (gloo aborts the process on
//     an oversized receive and NCCL hangs on mismatched counts; neither fails).
//
// Header fields and payload per op (fields are int64; `w` is the world size):
//  * AllReduce, AllGather, AllToAll, Barrier: no fields (the sizes are arguments);
//    AllReduce reduces in rank order on every transport (ReduceInRankOrder).
//  * AllGatherBytes, Broadcast, Gather: field 0 is the rank's byte count (the root's,
//    for Broadcast, is the size every rank receives).
//  * AllToAllV: AllToAllVFields: the w send counts, then the w receive counts;
//    CheckAllToAllVFields then checks them pairwise (what s sends to r is what r
//    expects from s).
//  * AllToAllBytes: FlattenAllToAllBytes: the w send sizes. Rank r receives
//    field(s, r) bytes from rank s, at BlockOffset(s, r) of s's payload.
//
// Deadlines: CallOptions::timeout bounds the whole call (header and payload rounds
// together): a rank missing at the deadline is DeadlineExceeded naming the call. A
// peer that died or left is Unavailable. After the first error the communicator is
// broken (FirstError below): every later call fails at once with FailedPrecondition
// naming that error.
//
// Thread safety: plain functions; FirstError is one communicator's (one thread).
#ifndef LOCKSTEP_RUNTIME_COMM_COLLECTIVE_PROTOCOL_H_
#define LOCKSTEP_RUNTIME_COMM_COLLECTIVE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_op.h"

namespace lockstep::comm {

// Rank r's header field i, however the transport stores it.
using HeaderField = absl::FunctionRef<int64_t(int r, int i)>;

// AllToAllV's header fields: send_counts then recv_counts (empty if spec.local fails).
std::vector<int64_t> AllToAllVFields(const CallSpec& spec, absl::Span<const int64_t> send_counts,
                                     absl::Span<const int64_t> recv_counts);

// AllToAllV's check once every header is in: CheckAllToAllVPairs over the fields of
// AllToAllVFields.
absl::Status CheckAllToAllVFields(const CallSpec& spec, int world, HeaderField field);

// This rank's side of an AllToAllBytes: its header fields (the size of each block,
// empty if spec.local fails), the blocks back to back, and where its own block starts.
struct FlatBlocks {
  std::vector<int64_t> sizes;
  std::string flat;
  int64_t own_offset = 0;
};
FlatBlocks FlattenAllToAllBytes(const CallSpec& spec, int rank,
                                const std::vector<std::string>& send);

// Where rank s's block for rank r starts in s's payload: the sum of field(s, q) for
// q < r.
int64_t BlockOffset(HeaderField field, int s, int r);

// `flat` cut into consecutive strings of `sizes` (their sum must not exceed it).
std::vector<std::string> SplitBytes(absl::string_view flat, absl::Span<const size_t> sizes);

// The broken-after-the-first-error rule of communicator.h, for one communicator (each
// implementation in this package keeps one).
class FirstError {
 public:
  // OK while no call failed; else FailedPrecondition("<who> is broken by an earlier
  // error: <first error>"). `who` names the communicator ("gloo communicator of group
  // 'gen0/exec' rank 1").
  absl::Status CheckUsable(absl::string_view who) const;
  // Keeps `status` if it is the first error. Returns whether this call broke it.
  bool Record(const absl::Status& status);

 private:
  absl::Status first_;  // OK while usable.
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_COLLECTIVE_PROTOCOL_H_
