// Names of the collective operations of the Communicator interface, shared by every
// implementation so that errors and fault-injection rules name calls the same way:
// "AllReduce('vote')".
#ifndef LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_
#define LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/comm/communicator.h"

namespace lockstep::comm {

// One value per method of Communicator (except rank() and world_size()).
enum class CollectiveOp {
  kAllReduce,
  kAllGather,
  kAllGatherBytes,
  kBroadcast,
  kGather,
  kAllToAll,
  kAllToAllV,
  kAllToAllBytes,
  kBarrier,
};

// "AllReduce", "Gather", ... (the method name).
absl::string_view CollectiveOpName(CollectiveOp op);

// "sum", "min", "max".
absl::string_view ReduceOpName(ReduceOp op);

// "AllReduce('vote')": how errors name one rank's call.
std::string DescribeCall(CollectiveOp op, absl::string_view tag);

// InvalidArgument("AllToAllV('moe.l3') on rank 2: <problem>").
absl::Status InvalidCallArgument(CollectiveOp op, absl::string_view tag, int rank,
                                 absl::string_view problem);

// Checks one side of an AllToAllV: `counts` has one non-negative entry per rank and
// they add up to at most `capacity` floats. `side` is "send" or "recv".
absl::Status CheckAllToAllVCounts(absl::string_view tag, int rank, absl::string_view side,
                                  absl::Span<const int64_t> counts, size_t capacity, int world);

// out[i] = the reduction of inputs[r][i] over the ranks r in rank order, for i < count
// (inputs[r] points at rank r's int64 values; `out` may be inputs[0]). Sums wrap
// around (two's complement) on every transport alike.
void ReduceInRankOrder(int64_t* out, int64_t count, absl::Span<const char* const> inputs,
                       ReduceOp op);

// A 40-bit fingerprint of a call: the op, the tag and `args` (sizes, root, reduce op).
// Transports that cannot compare calls directly exchange it to detect a desync. The
// same in every process (no per-process hash seed); 40 bits keep sums of up to 2^20
// fingerprints inside an int64.
int64_t CallFingerprint(CollectiveOp op, absl::string_view tag,
                        std::initializer_list<int64_t> args = {});

// How many arguments CallSpec::args holds for `op` (see CallSpec).
size_t CallArgCount(CollectiveOp op);

// "AllReduce('vote') with 4 elements (max)", "Gather('responses') with root 0": a call
// with the arguments its fingerprint covers (`args` as CallSpec::args).
std::string DescribeCallArgs(CollectiveOp op, absl::string_view tag,
                             absl::Span<const int64_t> args);

// One rank's call as the transports that compare calls across processes see it: the
// op, tag and the arguments that must agree (AllReduce: {n, reduce op}; AllGather: {n};
// AllToAll: {n per block}; Broadcast and Gather: {root}; others: none), their
// fingerprint, and this rank's own argument error (`local`; OK when valid). A rank
// with bad arguments still takes part in the call's first round, so that every peer
// learns of it and fails too. Made by the Spec* functions below, one per operation;
// every transport validates arguments through them.
struct CallSpec {
  CollectiveOp op = CollectiveOp::kBarrier;
  absl::string_view tag;
  int64_t args[3] = {0, 0, 0};
  int num_args = 0;
  int64_t fp = 0;
  absl::Status local;

  absl::Span<const int64_t> arg_span() const { return {args, static_cast<size_t>(num_args)}; }
  std::string Describe() const { return DescribeCallArgs(op, tag, arg_span()); }
};

CallSpec SpecAllReduce(absl::string_view tag, size_t n, ReduceOp reduce);
CallSpec SpecBarrier(absl::string_view tag);
// `out` must hold world * in elements.
CallSpec SpecAllGather(absl::string_view tag, int rank, int world, size_t in, size_t out);
CallSpec SpecAllGatherBytes(absl::string_view tag);
// Broadcast and Gather: `root` must be a rank of the group.
CallSpec SpecRooted(CollectiveOp op, absl::string_view tag, int rank, int world, int root);
// `send` and `recv` must be the same multiple of world.
CallSpec SpecAllToAll(absl::string_view tag, int rank, int world, size_t send, size_t recv);
// Each side's counts: one non-negative entry per rank, adding up to at most the
// side's capacity (in floats).
CallSpec SpecAllToAllV(absl::string_view tag, int rank, int world,
                       absl::Span<const int64_t> send_counts, size_t send_capacity,
                       absl::Span<const int64_t> recv_counts, size_t recv_capacity);
// `send_entries` must be world.
CallSpec SpecAllToAllBytes(absl::string_view tag, int rank, int world, size_t send_entries);

// The pairwise check of an all-to-all-v once every rank's counts are known:
// sent(s, r), what rank s sends to rank r, must equal expected(r, s), what r expects
// from s. Internal("collective desync: AllToAllV('moe.l3'): rank 0 sends 2 floats to
// rank 1, which expects 1") otherwise. `unit` names the element ("floats", "bytes").
absl::Status CheckAllToAllVPairs(const CallSpec& spec, int world, absl::string_view unit,
                                 absl::FunctionRef<int64_t(int s, int r)> sent,
                                 absl::FunctionRef<int64_t(int r, int s)> expected);

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_
