// GlooCall: one collective call of a GlooCommunicator on its gloo context, with the
// call's deadline shared by all its rounds, and the rounds of the wire protocol
// described in gloo_communicator.h (inline rounds that carry the call's fingerprint,
// the header exchange of collective_wire.h, and payload rounds with agreed sizes).
//
// Internal to GlooCommunicator. Methods may throw gloo exceptions (gloo reports every
// transport error that way); GlooCommunicator::Run catches and converts them.
// Thread safety: one call, one thread.
#ifndef LOCKSTEP_RUNTIME_COMM_GLOO_CALL_H_
#define LOCKSTEP_RUNTIME_COMM_GLOO_CALL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_op.h"
#include "runtime/comm/collective_wire.h"
#include "runtime/comm/communicator.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace lockstep::comm::internal {

// Elements per block that fixed-size ops send in one round.
inline constexpr int64_t kGlooInlineElements = 30;
class GlooCall {
 public:
  // `context` must outlive the call.
  GlooCall(const std::shared_ptr<gloo::Context>& context, CollectiveOp op,
           const CallOptions& options);

  int rank() const;
  int world() const;
  // One round each, every block padded to kGlooInlineElements + 2 and carrying the
  // call's fingerprint and info word (collective_wire.h; for gathers, a rank's own
  // argument error spec.local is returned after the round, so that peers learn of
  // it). Fail with Internal on a fingerprint mismatch.
  absl::Status InlineAllReduce(absl::Span<int64_t> data, ReduceOp reduce, const CallSpec& spec);
  absl::Status InlineAllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                               const CallSpec& spec);
  absl::Status InlineAllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                              const CallSpec& spec);

  // The header round of collective_wire.h: all-gathers every rank's header (`fields`,
  // and `inline_data` if it fits kWireInlineBytes) and checks them.
  absl::StatusOr<WireHeaders> ExchangeHeaders(const CallSpec& spec,
                                              absl::Span<const int64_t> fields,
                                              absl::string_view inline_data = {});

  // Payload rounds; sizes must already agree across ranks.
  absl::Status AllReduce(int64_t* data, size_t n, ReduceOp reduce);
  absl::Status AllGather(const int64_t* in, int64_t* out, size_t per_rank);
  absl::Status AllToAll(const int64_t* in, int64_t* out, size_t total);
  absl::Status AllToAllV(const float* in, std::vector<int64_t> in_counts, float* out,
                         std::vector<int64_t> out_counts);
  absl::Status AllToAllV(const char* in, std::vector<int64_t> in_counts, char* out,
                         std::vector<int64_t> out_counts);
  absl::Status AllGatherV(absl::string_view in, char* out, std::vector<size_t> sizes);
  absl::Status Broadcast(char* data, size_t size, int root);
  // Variable-size gather to `root` (point to point); `*out` is filled on the root.
  absl::Status Gather(absl::string_view in, int root, const std::vector<size_t>& sizes,
                      std::string* out);

 private:
  // Time left for the next round (at least 1 ms), or DeadlineExceeded.
  absl::StatusOr<std::chrono::milliseconds> Remaining() const;
  // All-gathers `mine` (the same size on every rank) through one all-reduce of the
  // world x width block; returns rank r's row at r * mine.size().
  absl::StatusOr<std::vector<int64_t>> GatherRows(absl::Span<const int64_t> mine, uint32_t tag);
  absl::Status AllGatherRaw(const int64_t* in, int64_t* out, size_t per_rank, uint32_t tag);
  absl::Status AllToAllRaw(const int64_t* in, int64_t* out, size_t total, uint32_t tag);
  template <typename T>
  absl::Status AllToAllVRaw(const T* in, std::vector<int64_t> in_counts, T* out,
                            std::vector<int64_t> out_counts);

  const std::shared_ptr<gloo::Context>& context_;
  const CollectiveOp op_;
  const absl::string_view tag_;
  const absl::Duration timeout_;
  const absl::Time deadline_;
};

}  // namespace lockstep::comm::internal

#endif  // LOCKSTEP_RUNTIME_COMM_GLOO_CALL_H_
