#include "runtime/cuda/cpu/nccl/segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep::cuda_cpu::nccl {
namespace {

constexpr size_t kPage = 4096;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Waits a little before the next look at a segment another rank is initializing (a
// window of one ftruncate and a few stores): yields first, then sleeps up to 1 ms.
void BackOff(int attempt) {
  if (attempt < 64) {
    sched_yield();
  } else {
    absl::SleepFor(absl::Microseconds(std::min(1000, 10 * (attempt - 63))));
  }
}

}  // namespace

size_t Segment::TotalBytes(int world, size_t chunk_bytes, size_t slots) {
  const size_t controls = RoundUp(world * sizeof(RankControl), kPage);
  const size_t ring = sizeof(RingControl) + slots * (kChunkHeaderBytes + chunk_bytes);
  return RoundUp(kControlsOffset + controls + world * world * ring, kPage);
}

Segment::Segment(std::string name, bool created, int world, size_t chunk_bytes, size_t slots,
                 char* base, size_t bytes)
    : name_(std::move(name)),
      created_(created),
      world_(world),
      chunk_bytes_(chunk_bytes),
      slots_(slots),
      base_(base),
      bytes_(bytes) {
  rings_offset_ = kControlsOffset + RoundUp(world * sizeof(RankControl), kPage);
  ring_bytes_ = sizeof(RingControl) + slots * (kChunkHeaderBytes + chunk_bytes);
}

Segment::~Segment() { munmap(base_, bytes_); }

absl::StatusOr<std::unique_ptr<Segment>> Segment::CreateOrOpen(
    const std::string& name, int world, const uint64_t nonce[2], size_t chunk_bytes, size_t slots,
    absl::Time deadline, const std::function<bool()>& cancelled) {
  if (world < 1 || world > kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a communicator of ", world, " ranks (this layer supports 1 to ", kMaxRanks, ")"));
  }
  chunk_bytes = RoundUp(std::max<size_t>(chunk_bytes, 64), 64);
  slots = std::max<size_t>(slots, 2);
  const std::string path = "/" + name;
  Fd fd;
  bool created = true;
  fd.fd = shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd.fd < 0 && errno == EEXIST) {
    created = false;
    fd.fd = shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0);
  }
  if (fd.fd < 0) return Errno(absl::StrCat("shm_open of the communicator's segment ", path));

  size_t bytes = TotalBytes(world, chunk_bytes, slots);
  if (created) {
    if (int err = posix_fallocate(fd.fd, 0, bytes); err != 0) {
      UnlinkSegment(name);
      return absl::ResourceExhaustedError(absl::StrCat("reserving ", bytes, " bytes of ", path,
                                                       " in /dev/shm: ", std::strerror(err)));
    }
  } else {
    // The creator may not have sized it yet.
    for (int attempt = 0;; ++attempt) {
      struct stat st;
      if (fstat(fd.fd, &st) != 0) return Errno(absl::StrCat("fstat of ", path));
      if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        return absl::PermissionDeniedError(
            absl::StrCat(path, " belongs to another user or is open to others (mode ",
                         absl::Hex(st.st_mode & 0777), "): not a segment of this communicator"));
      }
      if (st.st_size > 0) {
        bytes = st.st_size;
        break;
      }
      if (cancelled()) return absl::CancelledError("aborted while joining the segment");
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(path, " was never sized by its creator"));
      }
      BackOff(attempt);
    }
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (base == MAP_FAILED) return Errno(absl::StrCat("mmap of ", path));
  auto* header = static_cast<SegmentHeader*>(base);
  if (created) {
    new (base) SegmentHeader();
    header->version = kSegmentVersion;
    header->world = world;
    header->nonce[0] = nonce[0];
    header->nonce[1] = nonce[1];
    header->chunk_bytes = chunk_bytes;
    header->slots = slots;
    header->total_bytes = bytes;
    header->magic.store(kSegmentMagic, std::memory_order_release);
    FutexWakeAll(header->arrived);
    return std::unique_ptr<Segment>(
        new Segment(name, true, world, chunk_bytes, slots, static_cast<char*>(base), bytes));
  }
  for (int attempt = 0; header->magic.load(std::memory_order_acquire) != kSegmentMagic; ++attempt) {
    if (cancelled() || absl::Now() > deadline) {
      munmap(base, bytes);
      return cancelled() ? absl::CancelledError("aborted while joining the segment")
                         : absl::DeadlineExceededError(
                               absl::StrCat(path, " was never initialized by its creator"));
    }
    BackOff(attempt);
  }
  std::string problem;
  if (header->version != kSegmentVersion) {
    problem = absl::StrCat("layout version ", header->version, ", expected ", kSegmentVersion);
  } else if (header->nonce[0] != nonce[0] || header->nonce[1] != nonce[1]) {
    problem = "it was made for another ncclUniqueId";
  } else if (header->world != static_cast<uint32_t>(world)) {
    problem = absl::StrCat("it was made for ", header->world, " ranks, this rank says ", world,
                           " (every rank must pass the same nranks)");
  } else if (header->total_bytes != bytes ||
             TotalBytes(world, header->chunk_bytes, header->slots) != bytes) {
    problem = "its size does not match its layout";
  }
  if (!problem.empty()) {
    munmap(base, bytes);
    return absl::InvalidArgumentError(absl::StrCat("segment ", path, ": ", problem));
  }
  return std::unique_ptr<Segment>(new Segment(name, false, world, header->chunk_bytes,
                                              header->slots, static_cast<char*>(base), bytes));
}

void UnlinkSegment(const std::string& name) { shm_unlink(("/" + name).c_str()); }

void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, absl::Duration timeout) {
  const int64_t ns = std::max<int64_t>(absl::ToInt64Nanoseconds(timeout), 0);
  struct timespec ts;
  ts.tv_sec = ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void RingDoorbell(RankControl& control) {
  control.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (control.sleeping.load(std::memory_order_seq_cst) != 0) FutexWakeAll(control.doorbell);
}

uint32_t PrepareToSleep(RankControl& control) {
  control.sleeping.store(1, std::memory_order_seq_cst);
  return control.doorbell.load(std::memory_order_seq_cst);
}

void SleepOnDoorbell(RankControl& control, uint32_t seen, absl::Duration timeout) {
  FutexWait(control.doorbell, seen, timeout);
  control.sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace lockstep::cuda_cpu::nccl
