#include "runtime/cuda/cpu/nccl/comm.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace lockstep::cuda_cpu::nccl {
namespace {

constexpr char kIdMagic[8] = {'L', 'S', 'N', 'C', 'C', 'L', 'C', '1'};
constexpr size_t kDefaultChunkBytes = size_t{32} << 10;
constexpr size_t kSlots = 4;
// How often waits look at things no futex announces: peers' pids, the deadline.
constexpr absl::Duration kLivenessInterval = absl::Milliseconds(20);

size_t ChunkBytes() {
  const char* env = std::getenv(kChunkBytesEnv);
  size_t bytes = 0;
  if (env != nullptr && absl::SimpleAtoi(env, &bytes) && bytes >= 64 &&
      bytes <= (size_t{1} << 24)) {
    return bytes;
  }
  return kDefaultChunkBytes;
}

ncclResult_t ResultOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return ncclSuccess;
    case absl::StatusCode::kUnavailable:
      return ncclRemoteError;
    case absl::StatusCode::kInvalidArgument:
      return ncclInvalidUsage;
    default:
      return ncclSystemError;
  }
}

}  // namespace

std::string UniqueId::SegmentName() const {
  return absl::StrCat("lockstep-nccl-", absl::Hex(nonce[0], absl::kZeroPad16),
                      absl::Hex(nonce[1], absl::kZeroPad16));
}

void EncodeUniqueId(const UniqueId& id, ncclUniqueId* out) {
  std::memset(out->internal, 0, sizeof(out->internal));
  std::memcpy(out->internal, kIdMagic, sizeof(kIdMagic));
  std::memcpy(out->internal + 8, id.nonce, sizeof(id.nonce));
}

bool DecodeUniqueId(const ncclUniqueId& in, UniqueId* id) {
  if (std::memcmp(in.internal, kIdMagic, sizeof(kIdMagic)) != 0) return false;
  std::memcpy(id->nonce, in.internal + 8, sizeof(id->nonce));
  return true;
}

CommState::CommState(int rank, int world, UniqueId id, std::string name, int device, Faults faults)
    : rank(rank),
      world(world),
      id(id),
      name(std::move(name)),
      device(device),
      faults(faults),
      send_seq(world, 0),
      recv_seq(world, 0),
      pidfds_(world, -1) {}

CommState::~CommState() {
  Abort(/*destroy=*/true);
  for (int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
}

std::string CommState::Where() const {
  return absl::StrCat("nccl communicator '", name, "' rank ", rank, " of ", world);
}

void CommState::StartBootstrap(absl::Time deadline) {
  bootstrap_thread_ = std::thread([this, deadline] { Bootstrap(deadline); });
}

void CommState::Bootstrap(absl::Time deadline) {
  absl::Status status = Join(deadline);
  if (status.ok()) {
    async.store(ncclSuccess, std::memory_order_release);
    return;
  }
  if (aborted.load()) return;
  const ncclResult_t code = absl::IsDeadlineExceeded(status) ? ncclSystemError : ResultOf(status);
  set_last_error(absl::StrCat(Where(), ": init: ", status.message()));
  std::fprintf(stderr, "NCCL WARN %s\n", last_error().c_str());
  async.store(code, std::memory_order_release);
}

absl::Status CommState::Join(absl::Time deadline) {
  if (faults.never_arrive) {
    // Injected: this rank never attaches.
    while (!aborted.load() && absl::Now() < deadline) {
      std::atomic<uint32_t> never{0};
      FutexWait(never, 0, kLivenessInterval);
    }
    return absl::DeadlineExceededError("never arrived (injected fault never_arrive)");
  }
  auto segment_or = Segment::CreateOrOpen(id.SegmentName(), world, id.nonce, ChunkBytes(), kSlots,
                                          deadline, [this] { return aborted.load(); });
  if (!segment_or.ok()) return segment_or.status();
  segment = *std::move(segment_or);
  RankControl& control = me();
  if (control.state.load() != static_cast<uint32_t>(RankState::kEmpty)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " of segment ", segment->name(),
                     " is already taken (two ranks called init with the same rank)"));
  }
  control.pid.store(getpid());
  control.state.store(static_cast<uint32_t>(RankState::kAttached));
  attached_ = true;
  segment->header().arrived.fetch_add(1);
  FutexWakeAll(segment->header().arrived);
  absl::Status everyone = WaitForEveryone(deadline);
  if (everyone.ok()) {
    all_arrived_ = true;
    if (segment->created()) UnlinkSegment(segment->name());
  }
  return everyone;
}

absl::Status CommState::WaitForEveryone(absl::Time deadline) {
  std::atomic<uint32_t>& arrived = segment->header().arrived;
  for (;;) {
    const uint32_t seen = arrived.load();
    for (int r = 0; r < world; ++r) {
      if (r == rank) continue;
      const uint32_t state = segment->control(r).state.load();
      if (state == static_cast<uint32_t>(RankState::kEmpty)) continue;
      OpenPidfd(r);
      if (absl::Status peer = CheckPeer(r); !peer.ok()) return peer;
    }
    if (seen >= static_cast<uint32_t>(world)) return absl::OkStatus();
    if (aborted.load()) return absl::CancelledError("aborted");
    if (absl::Now() >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < world; ++r) {
        if (segment->control(r).state.load() == static_cast<uint32_t>(RankState::kEmpty)) {
          missing.push_back(r);
        }
      }
      return absl::DeadlineExceededError(absl::StrCat("rank(s) ", absl::StrJoin(missing, ", "),
                                                      " never arrived in segment ", segment->name(),
                                                      " (", kBootstrapTimeoutEnv, ")"));
    }
    FutexWait(arrived, seen, kLivenessInterval);
  }
}

void CommState::OpenPidfd(int peer) {
  if (pidfds_[peer] >= 0) return;
  const pid_t pid = segment->control(peer).pid.load();
  if (pid <= 0) return;
  pidfds_[peer] = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

absl::Status CommState::CheckPeer(int peer) {
  const RankControl& control = segment->control(peer);
  switch (static_cast<RankState>(control.state.load(std::memory_order_acquire))) {
    case RankState::kLeft:
      return absl::UnavailableError(
          absl::StrCat("rank ", peer, " left the communicator (ncclCommDestroy)"));
    case RankState::kAborted:
      return absl::UnavailableError(absl::StrCat("rank ", peer, " aborted the communicator"));
    case RankState::kFailed:
      return absl::UnavailableError(absl::StrCat(
          "rank ", peer,
          " failed: ", std::string(control.error, strnlen(control.error, kErrorTextBytes))));
    default:
      break;
  }
  if (pidfds_[peer] >= 0) {
    struct pollfd fd = {pidfds_[peer], POLLIN, 0};
    if (poll(&fd, 1, 0) > 0) {
      return absl::UnavailableError(
          absl::StrCat("rank ", peer, " (pid ", control.pid.load(), ") exited"));
    }
  }
  return absl::OkStatus();
}

void CommState::Fail(ncclResult_t code, const std::string& message) {
  const std::string text = absl::StrCat(Where(), ": ", message);
  {
    // The first error wins. Its text is set before `async` shows the code, so a caller that
    // sees the code (ncclCommGetAsyncError, on another thread) also reads the text.
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_ || async.load(std::memory_order_acquire) != ncclSuccess) return;
    failed_ = true;
    last_error_ = text;
  }
  async.store(code, std::memory_order_release);
  std::fprintf(stderr, "NCCL WARN %s\n", text.c_str());
  RankControl& control = me();
  control.error_code.store(code);
  const size_t n = std::min(message.size(), kErrorTextBytes - 1);
  std::memcpy(control.error, message.data(), n);
  control.error[n] = '\0';
  control.state.store(static_cast<uint32_t>(RankState::kFailed), std::memory_order_release);
  for (int r = 0; r < world; ++r) RingDoorbell(segment->control(r));
}

void CommState::WaitUntilAborted() {
  while (!aborted.load()) {
    const uint32_t seen = PrepareToSleep(me());
    if (aborted.load()) break;
    SleepOnDoorbell(me(), seen, absl::Seconds(1));
  }
}

void CommState::Abort(bool destroy) {
  std::call_once(abort_once_, [&] {
    aborted.store(true);
    if (bootstrap_thread_.joinable()) bootstrap_thread_.join();
    if (segment == nullptr) return;
    if (attached_) {
      RankControl& control = me();
      if (control.state.load() == static_cast<uint32_t>(RankState::kAttached)) {
        control.state.store(
            static_cast<uint32_t>(destroy ? RankState::kLeft : RankState::kAborted));
      }
      for (int r = 0; r < world; ++r) RingDoorbell(segment->control(r));
      FutexWakeAll(segment->header().arrived);
    }
    if (!all_arrived_) UnlinkSegment(segment->name());
  });
}

std::string CommState::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void CommState::set_last_error(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = message;
}

}  // namespace lockstep::cuda_cpu::nccl
