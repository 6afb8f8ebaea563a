#include "runtime/comm/shm_group.h"

#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "runtime/comm/shm_direct.h"

namespace lockstep::comm::internal {
namespace {

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

uint32_t* FutexAddress(std::atomic<uint32_t>& word) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<uint32_t*>(&word);
}

// Sleeps while `word` still holds `expected`, at most `timeout` (shared, not
// FUTEX_PRIVATE: the word is in memory shared between processes).
void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(std::max(timeout, absl::Microseconds(1)));
  syscall(SYS_futex, FutexAddress(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, FutexAddress(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// CPUs this process may run on (its affinity mask: a cpuset or taskset may allow
// fewer than the machine has).
int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

constexpr uint64_t kProbeCookie = 0x6c6f636b73746570ULL;  // "lockstep"

// RAII count of a rank inside the sleep protocol (see WaitForRound).
class Sleeper {
 public:
  explicit Sleeper(std::atomic<uint32_t>& sleepers) : sleepers_(sleepers) { sleepers_++; }
  ~Sleeper() { sleepers_--; }

 private:
  std::atomic<uint32_t>& sleepers_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShmGroup>> ShmGroup::Join(const ShmOptions& options) {
  const std::string where = absl::StrCat("shm bootstrap of group '", options.name, "' on rank ",
                                         options.rank, " of ", options.world_size, ": ");
  if (options.world_size < 1 || options.world_size > kShmMaxWorld || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(where, "rank ", options.rank,
                                                   " is not in a world of ", options.world_size,
                                                   " (at most ", kShmMaxWorld, ")"));
  }
  if (options.chunk_bytes < 1 || options.chunk_bytes > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "chunk_bytes must be in [1, 2^30], got ", options.chunk_bytes));
  }
  if (absl::Status valid = ValidateShmName(options.name); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, valid.message()));
  }
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  absl::StatusOr<std::unique_ptr<ShmSegment>> segment =
      options.rank == 0 ? ShmSegment::Create(options.name, options.world_size, options.chunk_bytes)
                        : ShmSegment::Open(options.name, options.world_size, deadline);
  absl::Status status = segment.status();
  std::unique_ptr<ShmGroup> group;
  if (status.ok()) {
    group.reset(new ShmGroup(options, *std::move(segment)));
    status = group->Attach(deadline);
    if (status.ok()) status = group->AgreeOnDirectReads(deadline);
  }
  if (!status.ok()) {
    group.reset();
    // The group cannot form: leave nothing behind. (A name that already existed at
    // creation is not this Join's to remove.)
    if (!absl::IsAlreadyExists(status)) (void)UnlinkShmSegment(options.name);
    return absl::Status(status.code(), absl::StrCat(where, status.message()));
  }
  // Every rank has mapped the segment: the name is no longer needed.
  if (options.rank == 0) {
    if (absl::Status unlinked = UnlinkShmSegment(options.name); !unlinked.ok()) {
      return absl::Status(unlinked.code(), absl::StrCat(where, unlinked.message()));
    }
  }
  return group;
}

ShmGroup::ShmGroup(const ShmOptions& options, std::unique_ptr<ShmSegment> segment)
    : rank_(options.rank),
      world_(options.world_size),
      options_(options),
      segment_(std::move(segment)),
      oversubscribed_(options.world_size > UsableCpus()),
      cookie_(kProbeCookie ^ static_cast<uint64_t>(options.rank)),
      pidfds_(options.world_size, kPidfdUnopened),
      dead_(options.world_size, false) {}

ShmGroup::~ShmGroup() {
  ShmSlotControl& mine = segment_->control(rank_);
  if (mine.state.load() == static_cast<uint32_t>(ShmRankState::kAttached)) {
    SetState(ShmRankState::kLeft);
  }
  for (int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
}

void ShmGroup::SetState(ShmRankState state) {
  segment_->control(rank_).state.store(static_cast<uint32_t>(state));
  WakeAll();
}

void ShmGroup::WakeAll() {
  ShmGroupHeader& header = segment_->header();
  header.futex.fetch_add(1);
  FutexWakeAll(header.futex);
}

void ShmGroup::MarkBroken(absl::StatusCode code) {
  segment_->control(rank_).broken_code.store(static_cast<uint32_t>(code));
  segment_->control(rank_).broken_cause.store(gone_rank_ + 1);
  SetState(ShmRankState::kBroken);
}

template <typename Pending>
absl::Status ShmGroup::WaitForSlots(absl::Time deadline, absl::string_view what, Pending pending) {
  ShmGroupHeader& header = segment_->header();
  absl::Time next_liveness_check = absl::Now();
  // Unavailable naming the first attached peer that exited (its pid checked now).
  auto find_exited = [&](bool check_pids) {
    for (int r = 0; r < world_; ++r) {
      if (r == rank_ ||
          segment_->control(r).state.load() != static_cast<uint32_t>(ShmRankState::kAttached)) {
        continue;
      }
      OpenPeerPidfd(r);
      if (absl::Status gone = PeerGone(r, check_pids); !gone.ok()) {
        return absl::UnavailableError(absl::StrCat(gone.message(), " before every rank ", what));
      }
    }
    return absl::OkStatus();
  };
  while (true) {
    Sleeper sleeper(header.sleepers);
    const uint32_t word = header.futex.load();
    // Liveness first, the slots after: a wait that is complete succeeds even if a peer
    // has died or left since (the next wait, or the first call, reports it).
    const absl::Time now = absl::Now();
    const bool check_pids = now >= next_liveness_check;
    if (check_pids) next_liveness_check = now + options_.liveness_interval;
    const absl::Status exited = find_exited(check_pids);
    int left = -1;
    std::vector<int> missing;
    for (int r = 0; r < world_; ++r) {
      const auto state = static_cast<ShmRankState>(segment_->control(r).state.load());
      if (left < 0 && (state == ShmRankState::kLeft || state == ShmRankState::kBroken)) left = r;
      if (pending(r)) missing.push_back(r);
    }
    if (missing.empty()) return absl::OkStatus();
    if (left >= 0) {
      // A peer that gave up on the join most likely saw another one die: name that one.
      RETURN_IF_ERROR(find_exited(/*check_pids=*/true));
      return absl::UnavailableError(absl::StrCat("rank ", left, " left before every rank ", what));
    }
    // A peer that attached and then died must not hold the others until the deadline.
    RETURN_IF_ERROR(exited);
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank(s) ", absl::StrJoin(missing, ", "), " did not ", what, " within ",
                       absl::FormatDuration(options_.connect_timeout)));
    }
    FutexWait(header.futex, word, std::min(deadline, next_liveness_check) - now);
  }
}

absl::Status ShmGroup::Attach(absl::Time deadline) {
  ShmSlotControl& mine = segment_->control(rank_);
  uint32_t expected = static_cast<uint32_t>(ShmRankState::kEmpty);
  if (mine.state.load() != expected) {
    return absl::AlreadyExistsError(
        absl::StrCat("rank ", rank_, " is already attached (pid ", mine.pid.load(), ")"));
  }
  mine.pid.store(static_cast<int32_t>(getpid()));
  mine.probe_address.store(reinterpret_cast<uint64_t>(&cookie_));
  if (!mine.state.compare_exchange_strong(expected,
                                          static_cast<uint32_t>(ShmRankState::kAttached))) {
    return absl::AlreadyExistsError(absl::StrCat("rank ", rank_, " is already attached"));
  }
  WakeAll();
  RETURN_IF_ERROR(WaitForSlots(deadline, "attach", [&](int r) {
    return segment_->control(r).state.load() == static_cast<uint32_t>(ShmRankState::kEmpty);
  }));
  for (int r = 0; r < world_; ++r) OpenPeerPidfd(r);
  return absl::OkStatus();
}

absl::Status ShmGroup::AgreeOnDirectReads(absl::Time deadline) {
  bool can_read = options_.direct_copy;
  for (int r = 0; r < world_ && can_read; ++r) {
    const ShmSlotControl& peer = segment_->control(r);
    can_read = r == rank_ || CanReadPeerMemory(peer.pid.load(), peer.probe_address.load(),
                                               kProbeCookie ^ static_cast<uint64_t>(r));
  }
  segment_->control(rank_).direct_state.store(can_read ? 1 : 2);
  WakeAll();
  RETURN_IF_ERROR(WaitForSlots(deadline, "probe its peers", [&](int r) {
    return segment_->control(r).direct_state.load() == 0;
  }));
  direct_ = true;
  for (int r = 0; r < world_; ++r)
    direct_ = direct_ && segment_->control(r).direct_state.load() == 1;
  return absl::OkStatus();
}

void ShmGroup::OpenPeerPidfd(int r) {
  if (pidfds_[r] != kPidfdUnopened) return;
  pidfds_[r] = -1;
  const pid_t pid = segment_->control(r).pid.load();
  if (r == rank_ || pid == getpid()) return;
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    pidfds_[r] = fd;
  } else if (errno == ESRCH) {
    dead_[r] = true;
  }
  // Otherwise (no pidfd_open): PeerGone falls back to kill(pid, 0).
}

bool ShmGroup::AllPublished(uint64_t target, int* missing) const {
  for (int r = 0; r < world_; ++r) {
    if (segment_->control(r).seq.load() < target) {
      *missing = r;
      return false;
    }
  }
  return true;
}

void ShmGroup::Publish() {
  ++seq_;
  segment_->control(rank_).seq.store(seq_);
  // Only the rank that completes the round wakes the sleepers: nobody else can be
  // waiting for anything this publish provides (see the file comment).
  int missing = 0;
  if (segment_->header().sleepers.load() > 0 && AllPublished(seq_, &missing)) WakeAll();
}

absl::Status ShmGroup::PeerGone(int r, bool check_pids) {
  const ShmSlotControl& peer = segment_->control(r);
  const auto state = static_cast<ShmRankState>(peer.state.load());
  if (state == ShmRankState::kLeft) {
    gone_rank_ = r;
    return absl::UnavailableError(absl::StrCat("rank ", r, " left the group"));
  }
  if (state == ShmRankState::kBroken) {
    // That rank gave up because of some rank that left or died: name the cause.
    if (absl::Status cause = FindDepartedPeer(); !cause.ok()) return cause;
    const int cause = peer.broken_cause.load() - 1;
    if (cause >= 0 && cause != rank_) {
      gone_rank_ = cause;
      return absl::UnavailableError(absl::StrCat("rank ", cause, " (pid ",
                                                 segment_->control(cause).pid.load(),
                                                 ") is gone (rank ", r, " saw it leave or exit)"));
    }
    return absl::UnavailableError(absl::StrCat(
        "rank ", r, " failed an earlier call (",
        absl::StatusCodeToString(static_cast<absl::StatusCode>(peer.broken_code.load())), ")"));
  }
  const pid_t pid = peer.pid.load();
  if (check_pids && !dead_[r] && pid != getpid()) {
    if (pidfds_[r] >= 0) {
      pollfd fd = {pidfds_[r], POLLIN, 0};
      dead_[r] = poll(&fd, 1, 0) == 1 && (fd.revents & POLLIN) != 0;
    } else {
      dead_[r] = kill(pid, 0) != 0 && errno == ESRCH;
    }
  }
  if (dead_[r]) {
    gone_rank_ = r;
    return absl::UnavailableError(absl::StrCat("rank ", r, " (pid ", pid, ") exited"));
  }
  return absl::OkStatus();
}

absl::Status ShmGroup::NotePeerExited(int r) {
  dead_[r] = true;
  return PeerGone(r, /*check_pids=*/false);
}

absl::Status ShmGroup::FindDepartedPeer() {
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    const auto state = static_cast<ShmRankState>(segment_->control(r).state.load());
    if (state == ShmRankState::kBroken) continue;
    if (absl::Status gone = PeerGone(r, /*check_pids=*/true); !gone.ok()) return gone;
  }
  return absl::OkStatus();
}

absl::Status ShmGroup::WaitForRound(absl::Time deadline, Wait wait) {
  if (absl::Status status = WaitForAllPublished(deadline, wait); !status.ok()) return status;
  for (int r = 0; r < world_; ++r) {
    const ShmSlotControl& peer = segment_->control(r);
    if (r == rank_ || peer.state.load() != static_cast<uint32_t>(ShmRankState::kBroken)) continue;
    const auto code = static_cast<absl::StatusCode>(peer.broken_code.load());
    // A verdict every rank computes alike (desync, bad arguments) is this rank's to
    // find too; a rank that gave up waiting published a round it no longer serves.
    if (code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kUnavailable) {
      return PeerGone(r, /*check_pids=*/false);
    }
  }
  return absl::OkStatus();
}

absl::Status ShmGroup::WaitForAllPublished(absl::Time deadline, Wait wait) {
  const uint64_t target = seq_;
  int missing = 0;
  if (AllPublished(target, &missing)) return absl::OkStatus();
  // Busy phase: the peers are usually a few microseconds behind; unless this is a
  // kLong wait and ranks outnumber CPUs (see the file comment).
  const bool poll =
      options_.spin > absl::ZeroDuration() && !(oversubscribed_ && wait == Wait::kLong);
  const absl::Time spin_end = absl::Now() + options_.spin;
  for (int i = 1; poll; ++i) {
    if (oversubscribed_) {
      sched_yield();  // A peer may need this CPU to arrive at all.
    } else {
      CpuRelax();
    }
    if (AllPublished(target, &missing)) return absl::OkStatus();
    if ((oversubscribed_ || i % 32 == 0) && absl::Now() >= spin_end) break;
  }
  // Sleep phase. Announce the sleeper, read the futex word, re-check, then sleep only
  // while the word is unchanged: a publisher that completes the round after the
  // re-check sees the sleeper count and changes the word (sequentially consistent
  // atomics), so no wake-up is lost.
  ShmGroupHeader& header = segment_->header();
  absl::Time next_liveness_check = absl::Now();
  while (true) {
    Sleeper sleeper(header.sleepers);
    const uint32_t word = header.futex.load();
    if (AllPublished(target, &missing)) return absl::OkStatus();
    const absl::Time now = absl::Now();
    const bool check_pids = now >= next_liveness_check;
    if (check_pids) next_liveness_check = now + options_.liveness_interval;
    std::vector<int> late;
    for (int r = 0; r < world_; ++r) {
      if (segment_->control(r).seq.load() >= target) continue;
      if (absl::Status gone = PeerGone(r, check_pids); !gone.ok()) return gone;
      late.push_back(r);
    }
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank(s) ", absl::StrJoin(late, ", "), " did not arrive"));
    }
    FutexWait(header.futex, word, std::min(deadline, next_liveness_check) - now);
  }
}

}  // namespace lockstep::comm::internal
