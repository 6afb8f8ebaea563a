// Worker: one rank of an instance as a process (docs/design.md §2). It bootstraps the
// instance's collectives through the rendezvous service, loads the engine, sizes the
// KV pools from the model, runs the executor loop on its own thread, and — on the
// leader — hosts WorkerService, registers with the router and heartbeats.
//
// Lifecycle: Start() builds everything (bounded by the bootstrap timeout); Run() steps
// until the instance has drained (after RequestStop() on the leader: SIGTERM) or this
// rank can no longer take part in collectives (then every open stream ends with an
// error and Run returns it). Idle leaders wait on their inbox instead of spinning.
//
// Threads: docs/threading.md §1 lists every thread of a worker (the executor loop is
// Run's caller; the engine thread and its pool; gloo event loops; WorkerService handlers
// and the heartbeat on the leader; KV transfer serving and receive threads on context
// and generation ranks). Only the loop touches executor state.
#ifndef LOCKSTEP_RUNTIME_WORKER_WORKER_H_
#define LOCKSTEP_RUNTIME_WORKER_WORKER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "kvcache/block_allocator.h"
#include "runtime/config/deployment_config.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/device_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/worker/instance_bootstrap.h"
#include "runtime/worker/kv_event_publisher.h"
#include "runtime/worker/request_streams.h"
#include "runtime/worker/worker_service.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::worker {

struct WorkerOptions {
  config::DeploymentConfig deployment;
  std::string instance;
  int rank = 0;
  int world_size = 1;
  std::string rendezvous_address;              // the router's gRPC address (rendezvous + registry)
  std::string listen_address = "127.0.0.1:0";  // the leader's WorkerService
  std::string gloo_host = "127.0.0.1";         // where this rank's gloo device listens
  absl::Duration bootstrap_timeout = absl::Seconds(60);
  // Register with the router at `rendezvous_address` and heartbeat (leader).
  bool register_with_router = true;
  // Where the KV pools live (not owned; must outlive the worker). Null: host memory.
  // A device allocator (a CUDA build's) brings its copier, through which the KV
  // transfer reaches the pools (kvcache/block_copier.h); the CPU engine needs host
  // memory.
  kv::BlockAllocator* kv_allocator = nullptr;
  // engine cuda: this rank's GPU, its local rank on the node (worker_identity.h); -1:
  // rank % the instance's ranks per node.
  int device = -1;
};

class Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Start(WorkerOptions options);
  ~Worker();

  // Steps until drained (OK) or this rank fails (the error).
  absl::Status Run();
  // Any thread (signal-safe: one atomic store): drain and stop.
  void RequestStop() { stop_requested_.store(true); }

  // The leader's WorkerService address ("host:port"); empty on other ranks.
  const std::string& service_address() const { return service_address_; }
  exec::Executor& executor() { return *executor_; }

 private:
  explicit Worker(WorkerOptions options) : options_(std::move(options)) {}
  absl::Status Init();
  absl::Status StartService();
  void HeartbeatLoop();
  // Leader with KV events: sends the publisher's reports to the router.
  void KvEventLoop();
  HealthView Health() const;
  // engine cuda (worker_cuda.cc): bootstraps the groups, then starts the device engine
  // (weights on the GPU, its NCCL group) into device_; its pools' sizes, once the
  // weights are in (`kv.num_blocks: auto`); the engine over the pools.
  absl::Status StartDeviceEngine(const BootstrapOptions& boot,
                                 const spec::SpeculativeConfig& speculative);
  absl::Status SizeDevicePools(exec::ExecutorConfig& config) const;
  absl::StatusOr<std::unique_ptr<engine::ModelEngine>> FinishDeviceEngine(kv::KvManager& kv);
  // The KV transceiver of a context or generation rank; sets transceiver_address_.
  absl::StatusOr<std::unique_ptr<transfer::Transceiver>> CreateTransceiver(
      const kv::KvManager& kv, const exec::ExecutorConfig& config);

  const WorkerOptions options_;
  const config::InstanceConfig* instance_ = nullptr;
  InstanceGroups groups_;
  // engine cuda: its builder, which owns the device allocator of the KV pools and the
  // engine's NCCL group, so it outlives both (members are destroyed in reverse order).
  std::unique_ptr<engine::DeviceEngineBuilder> device_;
  // The CPU engine's expert-load windows (eplb.load_window), read by Stats.
  engine::ExpertLoadBoard expert_loads_;
  std::unique_ptr<engine::ModelEngine> engine_;
  std::unique_ptr<transfer::Transceiver> transceiver_;
  std::unique_ptr<KvEventPublisher> kv_events_;  // leader with KV events; outlives executor_
  std::unique_ptr<exec::Executor> executor_;
  RequestStreams streams_;
  std::unique_ptr<WorkerServiceImpl> service_;
  std::unique_ptr<grpc::Service> checked_service_;  // service_ behind the cluster token
  std::unique_ptr<grpc::Server> server_;
  std::string service_address_;
  std::string transceiver_address_;
  std::thread heartbeat_;
  std::thread kv_event_thread_;
  absl::Notification stopping_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<int64_t> last_progress_nanos_{0};
  std::atomic<bool> failed_{false};
};

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_WORKER_H_
