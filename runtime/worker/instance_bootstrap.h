// Bootstrap of an instance's collectives: the ranks agree on a fresh epoch through the
// rendezvous service, then build two groups under it — the executor's and the
// engine's (they run on different threads and must never share a group) — each over
// gloo (TCP) or shared memory (comm/shm_communicator.h).
//
// Why an epoch: a rendezvous key space outlives a worker process, so an instance that
// is relaunched would otherwise read the previous incarnation's gloo addresses (or
// attach to its shared-memory segments). The leader publishes a random epoch; every
// other rank joins under the epoch it reads, with a nonce of its own, and waits for
// the leader's acknowledgement of that nonce; a stale epoch is never acknowledged, so
// the rank re-reads the leader key until it finds the live one. Every wait is bounded.
//
// Transport choice: each joiner publishes its host id (comm/shm_host_id.h) before it
// joins; the leader compares them with its own, resolves `auto` (shm when every rank
// is on its host, else gloo) and explicit `shm` (an error on every rank when they are
// not), publishes the choice under the epoch before acknowledging anyone, and every
// rank logs it. Segments are named after the epoch; the leader also removes the
// previous epoch's segment names, which a crash during that launch's bootstrap may
// have left in /dev/shm.
#ifndef LOCKSTEP_RUNTIME_WORKER_INSTANCE_BOOTSTRAP_H_
#define LOCKSTEP_RUNTIME_WORKER_INSTANCE_BOOTSTRAP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::worker {

struct BootstrapOptions {
  std::string rendezvous_address;  // host:port of the rendezvous service
  std::string instance;            // instance name (the key space)
  int rank = 0;
  int world_size = 1;
  std::string hostname = "127.0.0.1";  // where this rank's gloo device listens
  absl::Duration timeout = absl::Seconds(60);
  // instances[i].comm: the executor's and the engine's group (the leader's settings
  // decide; every rank of an instance reads the same file).
  config::CommTransport vote_transport = config::CommTransport::kGloo;
  config::CommTransport engine_transport = config::CommTransport::kGloo;
  // This rank's shared-memory domain; empty: comm::ShmHostId() (tests override it).
  std::string host_id;
};

struct InstanceGroups {
  std::string epoch;
  std::unique_ptr<comm::Communicator> executor;  // the step's collectives
  // The engine's expert-parallel group; null with "nccl" (the CUDA engine makes it).
  std::unique_ptr<comm::Communicator> engine;
  std::string executor_transport;  // "gloo" or "shm"
  std::string engine_transport;  // "gloo", "shm" or "nccl"
};

// Blocks until every rank of the instance has joined (or `timeout`).
absl::StatusOr<InstanceGroups> BootstrapInstance(const BootstrapOptions& options);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_INSTANCE_BOOTSTRAP_H_
