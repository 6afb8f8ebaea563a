// Groups of communicators whose ranks are threads of the test process, for every
// transport: the shared contract suite (communicator_contract_test.cc) runs the same
// cases on each of them.
//
//   ASSIGN_OR_RETURN(ThreadGroup group, MakeThreadGroup(Transport::kShm, 4));
//   std::vector<absl::Status> results = RunAll(group, [](Communicator& comm) { ... });
#ifndef LOCKSTEP_RUNTIME_COMM_TESTING_THREAD_GROUPS_H_
#define LOCKSTEP_RUNTIME_COMM_TESTING_THREAD_GROUPS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/shm_options.h"

namespace lockstep::comm::testing {

enum class Transport {
  kInProcess,  // InProcessCommunicator
  kGloo,       // GlooCommunicator over TCP loopback, FileStore bootstrap
  kShm,        // ShmCommunicator, default options
  kNcclFake,   // NcclCommunicator over FakePrimitives
};

// "in_process", "gloo", "shm", "nccl_fake" (test-name safe).
std::string TransportName(Transport transport);

// What a transport can tell, where the contract leaves it open (communicator.h).
struct TransportTraits {
  // Calls of different ops meet and are a desync (gloo: they time out instead).
  bool detects_other_op = true;
  // A peer that destroyed its communicator is Unavailable for the others at once.
  bool peer_exit_is_unavailable = true;
  // That error names the peer's rank (gloo names its address).
  bool names_the_failed_peer = true;
  // A rank that arrives after its peers timed out finds them broken (Unavailable)
  // at once instead of at its own deadline.
  bool late_rank_sees_broken_peers = false;
};
TransportTraits TraitsOf(Transport transport);

using ThreadGroup = std::vector<std::unique_ptr<Communicator>>;
using RankFn = std::function<absl::Status(Communicator&)>;

// The `world` ranks of one fresh group (rank r at index r). Ranks whose creation
// blocks until every rank joined are created on one thread each.
absl::StatusOr<ThreadGroup> MakeThreadGroup(Transport transport, int world);

// A kShm group with `options` (payload modes, timeouts) for every rank; rank and
// world_size are set per rank, and an empty name becomes a FreshShmName. If a rank
// fails to join: the error of the lowest such rank.
absl::StatusOr<ThreadGroup> MakeShmThreadGroup(int world, ShmOptions options);

// Runs fns[r] on rank r of `group`, one thread per rank; returns each rank's status.
std::vector<absl::Status> RunRanks(ThreadGroup& group, const std::vector<RankFn>& fns);
std::vector<absl::Status> RunAll(ThreadGroup& group, const RankFn& fn);

// A shm segment name that no other test, process or run uses.
std::string FreshShmName(absl::string_view what);

}  // namespace lockstep::comm::testing

#endif  // LOCKSTEP_RUNTIME_COMM_TESTING_THREAD_GROUPS_H_
