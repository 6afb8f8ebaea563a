// gRPC stubs for the WorkerService of each instance leader, one channel per address,
// created on first use and kept (channels reconnect by themselves).
//
// Thread safety: thread-safe; the returned stubs are thread-safe too.
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_WORKER_STUBS_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_WORKER_STUBS_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "proto/worker.grpc.pb.h"

namespace lockstep::router {

class WorkerStubs {
 public:
  // The stub for the leader at `address` (host:port). A channel that is failing to
  // connect (its worker died) is replaced by a fresh one, so a worker restarted at the
  // same address is reached at once instead of after the old channel's backoff.
  std::shared_ptr<v1::WorkerService::Stub> Get(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // The same on a channel (and connection) of its own, for the health monitor's polls:
  // they never queue behind the generation streams of Get's channel.
  std::shared_ptr<v1::WorkerService::Stub> GetControl(const std::string& address)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<v1::WorkerService::Stub> stub;
  };
  absl::Mutex mu_;
  // By address; kind 0: streams (Get), 1: control (GetControl).
  std::shared_ptr<v1::WorkerService::Stub> GetKind(const std::string& address, int kind)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::flat_hash_map<std::string, Entry> stubs_[2] ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_WORKER_STUBS_H_
