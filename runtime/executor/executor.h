// Executor: the step loop of one rank (docs/design.md §3), for the overlap loop. Phases
// carry docs/design.md's numbers; phase 2 runs first, then 1, then 3 to 10 in order.
//
//   2. Transfers (first): poll KV receives and sends (rank-local); promote finished
//      receives; fail expired ones.
//   1. Intake: the leader broadcasts new requests, cancels, the drain order and (by its
//      clock) the drain deadline's expiry; all ranks all-gather their loads and assign
//      new requests with AssignRanks.
//   3. Pre-schedule pad: the instance has work but this rank has nothing schedulable.
//   4. Schedule (growth recorded in a Rollback).
//   5. Post-schedule pad: this rank scheduled nothing although the instance has work.
//   6. Vote: one all-reduce. If any rank's batch is empty, no rank forwards; each rank
//      undoes this step's growth and its pending dummy in all pools.
//   7. Launch the batch on the engine (asynchronous).
//   8. Complete the previous batch — deferred exactly as in the anchor's table when
//      the fleet vetoed while this rank had a batch. Updates carry the cache
//      generation they were computed for; stale ones are skipped and counted.
//   9. Respond: gather responses to the leader; terminate finished requests.
//  10. Audit (optional): every invariant of docs/design.md §7. With `audit_every_step` the
//      pools are also compared with a copy taken before the schedule when the step was
//      not forwarded (growth never survives a veto).
//
// Every rank runs the same collectives in the same order every step, whatever its
// local state; rank-local outcomes (errors, finished transfers) are published at the
// next vote and response gather. A failed request never stops the loop; only a failed
// collective or a stuck engine (this rank can no longer vote) makes Step return an
// error.
//
// Parts that own their state (each header says what): InstanceLoads (phase 1: what the
// load all-gather told this rank of every rank), BatchInFlight (phases 7-8: the batch
// in flight and the deferral table), CacheAudit (phase 10: cache identity of every
// owner, the step's violations). Executor owns the requests (live, claimed, queued),
// the drain, the pad dummy, the outbox and the transfers' bookkeeping.
//
// Threading: Step() and everything else runs on the executor thread, which owns all
// scheduling, KV and request state. `inbox()` (leader) and `Snapshot()` may be used
// from any thread.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_EXECUTOR_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_EXECUTOR_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/ids.h"
#include "kvcache/audit.h"
#include "kvcache/kv_events.h"
#include "kvcache/kv_manager.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/model_engine.h"
#include "runtime/executor/batch_in_flight.h"
#include "runtime/executor/cache_audit.h"
#include "runtime/executor/executor_config.h"
#include "runtime/executor/instance_loads.h"
#include "runtime/executor/intake.h"
#include "runtime/executor/response.h"
#include "runtime/executor/step_stats.h"
#include "runtime/transfer/transceiver.h"
#include "scheduler/kv_rollback.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::exec {

// A thread-safe copy of the executor's state, published once per step.
struct ExecutorSnapshot {
  int64_t step = 0;
  absl::Time last_step_time;
  bool draining = false;
  bool drained = false;
  int64_t active_requests = 0;
  int64_t queued_requests = 0;  // accepted, not yet assigned to a rank
  int64_t claimed_requests = 0;
  kv::ManagerStats kv;
  // Free blocks per rank of the instance (target, draft), from the step's load
  // all-gather: the leader knows every rank's pools.
  std::vector<int64_t> free_target_blocks;
  std::vector<int64_t> free_draft_blocks;
  std::vector<int64_t> used_target_blocks;
  std::vector<int64_t> used_draft_blocks;
  // Every rank's load and prefix reuse (index: rank), and how unevenly the tokens in
  // flight were spread over them (sched::TokenImbalance), at the last step.
  std::vector<RankView> ranks;
  double token_imbalance = 1.0;
  // This rank's counters, and the instance's: per-rank counters summed over every rank
  // (as of the step's load all-gather), the others as on this rank.
  ExecutorCounters instance_counters;
  ExecutorCounters counters;
};

class Executor {
 public:
  struct Deps {
    comm::Communicator* comm = nullptr;            // the executor's group; not owned
    engine::ModelEngine* engine = nullptr;         // not owned
    std::unique_ptr<kv::KvManager> kv;             // owned
    transfer::Transceiver* transceiver = nullptr;  // not owned; null without disagg
    Clock* clock = nullptr;                        // not owned
    ResponseSink* sink = nullptr;                  // leader only; not owned
    // Leader only, with config.kv_events: every rank's KV event delta of each step in
    // which some rank's is not empty. Not owned.
    kv::KvEventSink* kv_event_sink = nullptr;
  };

  static absl::StatusOr<std::unique_ptr<Executor>> Create(const ExecutorConfig& config, Deps deps);
  ~Executor();

  // Any thread: where the leader's clients put requests, cancels and the drain order.
  Inbox& inbox() { return inbox_; }

  // One step. An error means this rank can no longer take part in collectives.
  absl::Status Step();
  // True once a drain has finished on every rank (they agree through the vote).
  bool drained() const { return drained_; }
  // The last step forwarded nothing anywhere (the loop may wait for input before the
  // next one); `busy` says whether any rank still held requests, claims or a batch.
  bool idle() const { return idle_; }
  bool busy() const { return busy_; }

  // Any thread.
  ExecutorSnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(snapshot_mu_);
  // How the instance speculates (constant after construction).
  const spec::SpeculativeConfig& speculative() const { return config_.scheduler.speculative; }
  // The method proposing drafts; kNone when the instance does not speculate.
  spec::Method spec_method() const {
    return speculative().enabled() ? speculative().method : spec::Method::kNone;
  }

  // ---- Executor thread (tests, simulator). ----
  const ExecutorConfig& config() const { return config_; }
  const kv::KvManager& kv() const { return *kv_; }
  const ExecutorCounters& counters() const { return counters_; }
  const StepStatsRing& step_stats() const { return stats_ring_; }
  // Every invariant violation of docs/design.md §7 visible on this rank now, and those the
  // last step found on its way (a veto that left growth behind, a cache older than its
  // owner).
  std::vector<std::string> Audit() const;
  // Live requests on this rank (not the dummy), and requests held by transfer claims.
  std::vector<RequestId> LiveIds() const;
  std::vector<RequestId> ClaimedIds() const;
  int64_t queued_requests() const { return static_cast<int64_t>(queue_.size()); }
  // One line per live request (state, progress, KV), for diagnostics.
  std::vector<std::string> DescribeRequests() const;
  bool has_batch_in_flight() const { return in_flight_.has_value(); }

 private:
  // Local facts every rank learns from the load all-gather.
  struct InstanceView {
    int64_t schedulable = 0;  // schedulable requests on all ranks, after assignment
  };

  Executor(const ExecutorConfig& config, Deps deps);

  // Step phases (executor.cc, executor_intake.cc, executor_batch.cc, executor_transfer.cc).
  absl::StatusOr<InstanceView> Intake();
  absl::Status ValidateNew(const NewRequestSpec& spec) const;
  void AdmitAssigned(std::vector<NewRequestSpec> specs);
  void HandleCancel(RequestId id);
  void PollTransfers();
  // Receives whose blocks were allocated this step wait in `pending_receives_` until no
  // engine batch launched before the allocation can still write those blocks (a block
  // freed after a launch may still be written by that batch), then start.
  void QueueReceives(const sched::ScheduleDecision& decision);
  void StartReadyReceives();
  // Hands a context-only request's KV to a transfer claim. If the send cannot start
  // the request fails (kTransferError) without a response: the caller sends it.
  void StartSend(sched::Request* request);
  void PadBeforeSchedule(const InstanceView& view);
  void PadAfterSchedule(const InstanceView& view, sched::ScheduleDecision* decision,
                        sched::Rollback* rollback);
  void RemoveDummy();
  // `agreement`: the forward's shape every rank voted for (step_vote.h).
  InFlightBatch Launch(const sched::ScheduleDecision& decision,
                       const engine::StepAgreement& agreement);
  absl::Status Complete(const InFlightBatch& batch);
  void ApplyResult(const InFlightEntry& entry, const engine::SequenceResult& result, absl::Time now,
                   StepStats* stats);
  void ApplyKvUpdate(const InFlightEntry& entry, int64_t used, kv::PoolKind pool,
                     uint64_t generation, int64_t grant);
  // Publishes the full blocks a decoding request's KV now holds (prompt and output, up
  // to `history` - 1) for prefix reuse: a follow-up turn's prompt extends both. Once
  // per completed block. Extends the request's prefix keys over those tokens (hashing
  // only the blocks they gained) and commits with them.
  void PublishDecoded(sched::Request& request, int64_t history);
  absl::Status Respond();
  void TerminateFinished();
  void FailRequest(sched::Request* request, absl::Status status, bool transfer);
  // FailRequest of a receive whose pull failed or missed transfer.deadline_ms: its
  // response says kv_pull_failed (the context instance may be at fault).
  void FailPull(sched::Request* request, absl::Status status);
  // A response's fields that describe `request` as it is now (id, rank, step, finish,
  // status, prompt and cached tokens, drafts); tokens and the context handle are the
  // caller's.
  void DescribeRequest(const sched::Request& request, Response& out) const;
  void EmitResponse(sched::Request* request);
  // The final response for a request that never got a Request (refused, or cancelled or
  // failed while queued at the leader): leader only.
  void EmitFinal(RequestId id, sched::FinishReason reason, absl::Status status);
  void Release(RequestId id);
  void PublishSnapshot();
  // Audit (executor_audit.cc; its state is audit_'s). Binds every owner's new caches
  // and drops closed ones.
  void BindCaches();
  // Tokens a cache may hold beyond its history now: its grant in the batch in flight,
  // the K draft positions an unpaired mirror keeps, the prompt a receive writes.
  int64_t CapacityAllowance(RequestId id, kv::PoolKind pool, uint64_t generation) const;
  void EnforceDrainDeadline();

  sched::Request* Find(RequestId id) const;
  std::vector<sched::Request*> ActiveView() const;
  int32_t eos_token_id() const { return engine_info_.eos_token_id; }
  bool is_leader() const { return config_.rank == 0; }
  comm::CallOptions Call(const char* tag) const {
    return comm::CallOptions{config_.collective_timeout, tag};
  }

  const ExecutorConfig config_;
  comm::Communicator* comm_;
  engine::ModelEngine* engine_;
  std::unique_ptr<kv::KvManager> kv_;
  transfer::Transceiver* transceiver_;
  Clock* clock_;
  ResponseSink* sink_;
  kv::KvEventSink* kv_event_sink_;
  // With config.kv_events: what the target radix tree did since the last gather.
  std::unique_ptr<kv::KvEventLog> kv_event_log_;
  engine::EngineInfo engine_info_;
  sched::Scheduler scheduler_;

  Inbox inbox_;

  // ---- Executor thread only. ----
  int64_t step_ = 0;
  // Live requests of this rank, in arrival order; the pad dummy (if any) last.
  std::vector<std::unique_ptr<sched::Request>> active_;
  absl::flat_hash_map<RequestId, sched::Request*> by_id_;
  // Context-only requests whose KV is being sent, by id (transfer claims).
  absl::flat_hash_map<RequestId, std::unique_ptr<sched::Request>> claims_;
  // Requests accepted by the instance but not yet assigned to a rank. Identical on
  // every rank (every rank applies the same broadcast and the same assignment).
  std::deque<NewRequestSpec> queue_;
  sched::Request* dummy_ = nullptr;
  // The batch launched and not yet processed, and the deferral table.
  BatchInFlight in_flight_;
  // Caches released since the last launch: the engine may drop their state.
  std::vector<kv::BlockRefs> released_;
  // Responses produced on this rank since the last gather.
  std::vector<Response> outbox_;
  int64_t errors_since_vote_ = 0;
  // Receives whose cancellation was requested (transfer deadline, drain deadline or
  // client cancel): why, and whether the pull missed its deadline.
  struct PendingCancel {
    absl::Status why;
    bool pull_late = false;
  };
  absl::flat_hash_map<RequestId, PendingCancel> cancelling_;
  bool draining_ = false;
  absl::Time drain_deadline_ = absl::InfiniteFuture();  // leader only (its clock)
  bool drain_expired_ = false;  // the leader broadcast that the deadline passed
  bool drained_ = false;
  bool idle_ = true;
  bool busy_ = false;
  // Every rank's pools, load and counters, as of the step's load all-gather.
  InstanceLoads loads_;
  // Generation-only requests with blocks allocated, waiting to start their receive:
  // (request id, the step that allocated the blocks).
  std::vector<std::pair<RequestId, int64_t>> pending_receives_;
  // When each receive in flight started (for the transfer throughput counters).
  absl::flat_hash_map<RequestId, absl::Time> receive_started_;
  ExecutorCounters counters_;
  // Cache identity of every owner, and violations found during the step (audit).
  CacheAudit audit_;
  StepStatsRing stats_ring_;
  StepStats current_;
  std::vector<int32_t> commit_tokens_;  // PublishDecoded's scratch

  mutable absl::Mutex snapshot_mu_;
  ExecutorSnapshot snapshot_ ABSL_GUARDED_BY(snapshot_mu_);
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_EXECUTOR_H_
