// GlooCommunicator: the Communicator of one process in a group of processes, over
// gloo's TCP transport (libgloo 0.0~git20220518, CPU only).
//
// Bootstrap: each rank publishes its TCP addresses in a gloo Store under `prefix` and
// connects to every peer (full mesh). Stores: gloo's FileStore on a directory shared
// by the ranks (single node), or RendezvousStore (the gRPC RendezvousService). One
// process may hold several groups with different prefixes (the executor's and the
// engine's); each has its own TCP device, connections and event-loop thread.
//
// Protocol: collective_protocol.h (header round, checks, agreed payload sizes, errors,
// the first error breaks the communicator). gloo aborts the process if a peer sends
// more bytes than a receive expects, so no payload moves before its size agrees. How
// gloo carries the rounds:
//  * Small fixed-size ops (AllReduce, AllGather, AllToAll with at most kInlineElements
//    elements per block, and Barrier) pad every block to kInlineElements + 2 int64 and
//    carry the call's fingerprint in it: one gloo round, and every rank checks the
//    fingerprints. The all-reduce block travels as ONE gloo element with a custom
//    reduction (values by the op, fingerprints by min and max), so gloo's ring moves a
//    single segment, exactly as for a one-int64 all-reduce.
//  * All other ops all-gather the header of collective_wire.h first; payloads of up to
//    kWireInlineBytes per rank (Broadcast, Gather, AllGatherBytes) travel inside it, so
//    the executor's intake and response exchanges take one round.
// Unlike shm and NCCL, calls that do not even use the same gloo operation (say
// AllReduce against Gather) cannot meet: they time out instead of reporting a desync.
//
// Errors: gloo throws; every exception is caught here and converted (timeouts ->
// DeadlineExceeded, connection errors such as a SIGKILLed peer -> Unavailable, the
// rest -> Internal), naming the call, the rank and the group. Every gloo wait is
// bounded by what is left of the call's timeout.
//
// Thread safety: one thread at a time (like every Communicator).
#ifndef LOCKSTEP_RUNTIME_COMM_GLOO_COMMUNICATOR_H_
#define LOCKSTEP_RUNTIME_COMM_GLOO_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_op.h"
#include "runtime/comm/collective_protocol.h"
#include "runtime/comm/communicator.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace lockstep::comm {

namespace internal {
class GlooCall;
}  // namespace internal

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  // Used only during Create; not owned. FileStore, RendezvousStore, or any gloo Store.
  // One store per rank: gloo's FileStore is not thread-safe, so ranks that are threads
  // of one process each open their own over the same directory.
  gloo::rendezvous::Store* store = nullptr;
  // Key prefix of this group in the store. Unique per group and per launch: a store
  // directory or key space reused with the same prefix would hand out stale addresses.
  std::string prefix;
  // Address the TCP device binds to and publishes.
  std::string hostname = "127.0.0.1";
  // Bound on the whole bootstrap (waiting for every peer's address and connecting).
  absl::Duration connect_timeout = absl::Seconds(30);
  // gloo's own default timeout; every call passes CallOptions::timeout explicitly.
  absl::Duration default_timeout = absl::Seconds(30);
  // Optional: the store's own record of its first error (RendezvousStore::first_error),
  // reported instead of gloo's message when the bootstrap fails.
  std::function<absl::Status()> store_error;
};

class GlooCommunicator final : public Communicator {
 public:
  // Blocks until every rank of the group has connected, or connect_timeout.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(const GlooOptions& options);

  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;
  ~GlooCommunicator() override;

  // Elements per block that fixed-size ops send in one round (see the file comment).
  static constexpr int64_t kInlineElements = 30;  // == internal::kGlooInlineElements

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const std::string& prefix() const { return prefix_; }
  // The underlying gloo context, for raw gloo calls on the same connections (the
  // benchmark's baseline). Raw calls must use gloo tag 0, must not overlap this
  // object's calls, and bypass its deadlines and error handling.
  const std::shared_ptr<gloo::Context>& gloo_context() const { return context_; }

  absl::Status AllReduce(absl::Span<int64_t> data, ReduceOp op,
                         const CallOptions& options) override;
  absl::Status AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                         const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> AllGatherBytes(absl::string_view data,
                                                          const CallOptions& options) override;
  absl::Status Broadcast(std::string* data, int root, const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> Gather(absl::string_view data, int root,
                                                  const CallOptions& options) override;
  absl::Status AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                        const CallOptions& options) override;
  absl::Status AllToAllV(absl::Span<const float> send, absl::Span<const int64_t> send_counts,
                         absl::Span<float> recv, absl::Span<const int64_t> recv_counts,
                         const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> AllToAllBytes(const std::vector<std::string>& send,
                                                         const CallOptions& options) override;
  absl::Status Barrier(const CallOptions& options) override;

 private:
  GlooCommunicator(const GlooOptions& options, std::shared_ptr<gloo::Context> context);

  // Runs `body` for one call: refuses if broken, converts gloo exceptions to a Status,
  // and marks the communicator broken on any error.
  absl::Status Run(const CallSpec& spec, const CallOptions& options,
                   absl::FunctionRef<absl::Status(internal::GlooCall&)> body);

  const int rank_;
  const int world_size_;
  const std::string prefix_;
  std::shared_ptr<gloo::Context> context_;
  FirstError broken_;
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_GLOO_COMMUNICATOR_H_
