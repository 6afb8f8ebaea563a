// ShmGroup: this rank's membership of a ShmCommunicator group — the mapped segment,
// the rounds it has published, and the waiting for its peers.
//
// Rounds. Every collective is one or more rounds. In round k a rank writes its buffer
// k % 2, then publishes seq = k + 1, then waits until every rank's seq >= k + 1 and
// reads the peers' buffers k % 2. A rank can only start round k + 2 (and overwrite
// buffer k % 2) after every peer has published k + 2 - 1 = k + 1, i.e. after every peer
// has finished reading round k: two buffers need no second barrier.
//
// Waiting: poll the peers' seq for `spin`, then sleep on the group's futex word. While
// the group has more ranks than this process has CPUs, the poll yields the CPU between
// checks (a peer may need it to arrive at all), and a kLong wait (peers still copying
// bulk data) does not poll but sleeps at once: its peers need the CPU for their copies,
// and under the kernel's EEVDF scheduler each sched_yield that hands the CPU over also
// pushes the yielding rank's deadline back a slice, so on a loaded host it came back
// late (docs/perf.md). A publisher wakes sleepers only when its own publish completes
// the round (at most one futex wake per round); a rank that leaves or breaks wakes
// everyone. Sleepers wake every `liveness_interval` to check, through pidfds opened at
// attach time, that the peers they wait for still exist, so a SIGKILLed peer is
// Unavailable within that interval, never a hang. Every wait is bounded by the call's
// deadline.
//
// Join: rank 0 creates the segment, the others open it; each attaches to its slot
// (pid, state) and waits until every rank has attached, then until every rank has
// probed whether it can read its peers' memory. Those waits check the attached peers'
// pids like a round's, so a peer that dies during the join is Unavailable within
// `liveness_interval`, not at connect_timeout. Rank 0 then unlinks the name:
// from there on nothing is left in /dev/shm, whatever happens to the processes. A Join
// that fails unlinks the name too. Only a crash between creation and the last attach
// leaves the name behind; the next epoch's bootstrap removes it (instance_bootstrap).
//
// Thread safety: one thread at a time (the owning ShmCommunicator's).
#ifndef LOCKSTEP_RUNTIME_COMM_SHM_GROUP_H_
#define LOCKSTEP_RUNTIME_COMM_SHM_GROUP_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/shm_options.h"
#include "runtime/comm/shm_segment.h"

namespace lockstep::comm::internal {

class ShmGroup {
 public:
  // Blocks until every rank has attached, or options.connect_timeout.
  static absl::StatusOr<std::unique_ptr<ShmGroup>> Join(const ShmOptions& options);

  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;
  // Marks this rank kLeft (unless broken) and wakes the peers.
  ~ShmGroup();

  int rank() const { return rank_; }
  int world() const { return world_; }
  const std::string& name() const { return segment_->name(); }
  const ShmSegment& segment() const { return *segment_; }
  // The index of the next round this rank will publish; its buffer is parity().
  uint64_t seq() const { return seq_; }
  uint64_t parity() const { return seq_ & 1; }

  // Publishes the round whose buffer this rank has just written (seq() advances).
  void Publish();
  // What a wait expects. kShort: the peers are microseconds behind (header rounds,
  // small payloads). kLong: the slowest peer may still be copying its share of a bulk
  // payload for hundreds of microseconds (the round that ends a direct call). See
  // the file comment for how each waits.
  enum class Wait { kShort, kLong };

  // Waits until every rank has published the round this rank published last.
  // DeadlineExceeded at `deadline`, naming the missing ranks; Unavailable when a
  // missing rank left, broke or died, and also when a rank that did publish gave up
  // on this round since (broke with DeadlineExceeded or Unavailable: this rank came
  // too late). The caller adds which call it was.
  absl::Status WaitForRound(absl::Time deadline, Wait wait = Wait::kShort);

  // Marks this rank broken by an error with `code`: peers waiting for it fail at
  // once with Unavailable.
  void MarkBroken(absl::StatusCode code);

  // Unavailable if rank `r` left, broke or exited (its pid checked now), else OK.
  absl::Status CheckPeer(int r) { return PeerGone(r, /*check_pids=*/true); }
  // Records that rank `r` exited (seen by a failed direct read); returns Unavailable
  // saying so.
  absl::Status NotePeerExited(int r);

  // Whether every rank can read every peer's memory (agreed at Join).
  bool direct() const { return direct_; }
  const ShmOptions& options() const { return options_; }
  pid_t pid(int rank) const { return segment_->control(rank).pid.load(); }

 private:
  ShmGroup(const ShmOptions& options, std::unique_ptr<ShmSegment> segment);

  absl::Status WaitForAllPublished(absl::Time deadline, Wait wait);
  // Whether every rank's seq >= target; else the first missing rank in *missing.
  bool AllPublished(uint64_t target, int* missing) const;
  // Unavailable if `r` left, broke, or (checked with `check_pids`) exited. For a
  // broken rank, names the rank that left or exited if there is one (the cause).
  absl::Status PeerGone(int r, bool check_pids);
  // Unavailable naming the first peer that left or exited, else OK.
  absl::Status FindDepartedPeer();
  void WakeAll();
  void SetState(ShmRankState state);
  absl::Status Attach(absl::Time deadline);
  // Probes every peer's memory and waits for every rank's verdict (sets direct_).
  absl::Status AgreeOnDirectReads(absl::Time deadline);
  // Waits until pending(r) is false for every rank r; `what` names the wait.
  template <typename Pending>
  absl::Status WaitForSlots(absl::Time deadline, absl::string_view what, Pending pending);
  // Opens rank r's pidfd once it has attached (a no-op after the first call).
  void OpenPeerPidfd(int r);

  const int rank_;
  const int world_;
  const ShmOptions options_;
  std::unique_ptr<ShmSegment> segment_;
  const bool oversubscribed_;  // more ranks than CPUs this process may run on
  uint64_t seq_ = 0;
  int gone_rank_ = -1;  // the last peer this rank saw leave or exit (told to peers on break)
  bool direct_ = false;
  const uint64_t cookie_;  // the word peers probe (shm_direct.h); its address is published
  // pidfd of each peer process (kPidfdUnopened until it attached; -1: same process,
  // or pidfd_open failed); dead_[r] once its exit was seen.
  static constexpr int kPidfdUnopened = -2;
  std::vector<int> pidfds_;
  std::vector<bool> dead_;
};

}  // namespace lockstep::comm::internal

#endif  // LOCKSTEP_RUNTIME_COMM_SHM_GROUP_H_
