// CommState: one rank's NCCL communicator in the CPU execution layer — its bootstrap
// into the shared segment (segment.h), its async state, its failure and abort, and
// what it knows of its peers.
//
// Bootstrap: every rank creates or opens the segment named by the ncclUniqueId,
// attaches (pid, then state kAttached, then bumps `arrived`) and waits until all
// `world` ranks have; then the creator unlinks the name, so nothing is left in
// /dev/shm. The wait checks the attached peers (a peer that aborted, failed or exited
// ends it with ncclRemoteError), `aborted`, and the bootstrap deadline
// (LOCKSTEP_NCCL_CPU_BOOTSTRAP_TIMEOUT_S, default 300 s: ncclSystemError naming the
// ranks that never came). A nonblocking init runs it on a bootstrap thread while the
// async state reads ncclInProgress.
//
// Failure: the first error of an operation (a mismatch, a departed peer, an injected
// fault) becomes the async state, the last error's text, and this rank's kFailed state
// in the segment (so peers waiting for it fail at once with ncclRemoteError). The
// operation then stays incomplete until Abort, as a failed NCCL kernel does.
//
// Abort (ncclCommAbort, and ncclCommDestroy, which does not flush): marks the state
// aborted, wakes whatever waits, joins the bootstrap thread, and tells the peers
// (kAborted, or kLeft for a destroy). Operations still queued on streams or recorded
// in graphs hold the state alive (shared_ptr) and do nothing when they run.
//
// Thread safety: `aborted`, `async` and the last error may be used from any thread;
// the operation state (op_mu) is held by the one operation running.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_COMM_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_COMM_H_

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/cuda/cpu/nccl/faults.h"
#include "runtime/cuda/cpu/nccl/segment.h"

namespace lockstep::cuda_cpu::nccl {

inline constexpr char kBootstrapTimeoutEnv[] = "LOCKSTEP_NCCL_CPU_BOOTSTRAP_TIMEOUT_S";
// Payload bytes per ring slot (the creator's choice; default 32 KiB), 4 slots a ring.
inline constexpr char kChunkBytesEnv[] = "LOCKSTEP_NCCL_CPU_CHUNK_BYTES";

// What an ncclUniqueId carries.
struct UniqueId {
  uint64_t nonce[2] = {0, 0};
  std::string SegmentName() const;
};
void EncodeUniqueId(const UniqueId& id, ncclUniqueId* out);
// False if `in` was not made by ncclGetUniqueId of this layer.
bool DecodeUniqueId(const ncclUniqueId& in, UniqueId* id);

struct CommState {
  CommState(int rank, int world, UniqueId id, std::string name, int device, Faults faults);
  ~CommState();

  const int rank;
  const int world;
  const UniqueId id;
  const std::string name;  // commName, or "" (for messages)
  const int device;
  const Faults faults;

  // "nccl communicator 'gen0/exec' rank 1 of 4".
  std::string Where() const;

  // Runs the bootstrap (the file comment); sets `async` to ncclSuccess or the error.
  void Bootstrap(absl::Time deadline);
  // Starts Bootstrap on `bootstrap_thread`.
  void StartBootstrap(absl::Time deadline);

  // Records the first error (see the file comment) and logs it to stderr.
  void Fail(ncclResult_t code, const std::string& message);
  // Blocks until `aborted` (an operation left incomplete after a failure).
  void WaitUntilAborted();
  // Abort or destroy (the file comment). Idempotent.
  void Abort(bool destroy);

  // ncclRemoteError-worthy Unavailable if `peer` left, aborted, failed or exited.
  absl::Status CheckPeer(int peer);

  std::string last_error() const;
  void set_last_error(const std::string& message);

  std::atomic<int> async{ncclInProgress};  // ncclResult_t
  std::atomic<bool> aborted{false};

  // Set by the bootstrap before `async` becomes ncclSuccess; read-only afterwards.
  std::unique_ptr<Segment> segment;
  RankControl& me() const { return segment->control(rank); }

  // Operation state, held by the running operation.
  std::mutex op_mu;
  uint64_t ops_run = 0;            // operations run (the last one's ordinal)
  std::vector<uint64_t> send_seq;  // messages sent to each peer
  std::vector<uint64_t> recv_seq;  // messages received from each peer

 private:
  absl::Status Join(absl::Time deadline);
  absl::Status WaitForEveryone(absl::Time deadline);
  void OpenPidfd(int peer);

  mutable std::mutex mu_;
  std::string last_error_;  // guarded by mu_
  bool failed_ = false;     // guarded by mu_: Fail has recorded the first error
  std::thread bootstrap_thread_;
  bool attached_ = false;     // written by the bootstrap, read after it is joined
  bool all_arrived_ = false;  // likewise
  std::vector<int> pidfds_;   // -1: not opened; only the bootstrap, then ops
  std::once_flag abort_once_;
};

}  // namespace lockstep::cuda_cpu::nccl

// The handle host code holds (ncclComm_t).
struct ncclComm {
  std::shared_ptr<lockstep::cuda_cpu::nccl::CommState> state;
};

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_COMM_H_
