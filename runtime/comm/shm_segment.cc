#include "runtime/comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep::comm {
namespace {

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::string Path(absl::string_view name) { return absl::StrCat("/", name); }

absl::Status Errno(int err, absl::string_view what, absl::string_view name) {
  const std::string message =
      absl::StrCat(what, " of shm segment '/", name, "': ", std::strerror(err));
  if (err == ENOSPC || err == ENOMEM) return absl::ResourceExhaustedError(message);
  if (err == EEXIST) return absl::AlreadyExistsError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// Closes a descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }

 private:
  int fd_;
};

}  // namespace

std::string ShmSegmentName(absl::string_view instance, absl::string_view epoch,
                           absl::string_view group) {
  std::string name = absl::StrCat("lockstep-", instance, "-", epoch, "-", group);
  for (char& c : name) {
    if (!IsNameChar(c)) c = '_';
  }
  return name;
}

absl::Status UnlinkShmSegment(const std::string& name) {
  if (shm_unlink(Path(name).c_str()) != 0 && errno != ENOENT) {
    return Errno(errno, "shm_unlink", name);
  }
  return absl::OkStatus();
}

namespace internal {

absl::Status ValidateShmName(absl::string_view name) {
  if (name.empty() || name.size() > 200) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm segment name must have 1..200 characters, got ", name.size()));
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm segment name '", name, "' may contain only [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

ShmLayout ShmLayout::For(int world, size_t chunk_bytes) {
  ShmLayout layout;
  layout.world = world;
  layout.chunk_bytes = RoundUp(std::max<size_t>(chunk_bytes, 64), 64);
  layout.fields_bytes = RoundUp(2 * sizeof(int64_t) * world, 64);
  layout.round_bytes = sizeof(ShmRoundHeader) + layout.fields_bytes + layout.chunk_bytes;
  layout.slot_bytes = RoundUp(sizeof(ShmSlotControl) + 2 * layout.round_bytes, kShmPageBytes);
  layout.total_bytes = kShmPageBytes + world * layout.slot_bytes;
  return layout;
}

ShmSegment::ShmSegment(std::string name, ShmLayout layout, char* base)
    : name_(std::move(name)), layout_(layout), base_(base) {}

ShmSegment::~ShmSegment() { munmap(base_, layout_.total_bytes); }

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(const std::string& name, int world,
                                                               size_t chunk_bytes) {
  if (absl::Status valid = ValidateShmName(name); !valid.ok()) return valid;
  const ShmLayout layout = ShmLayout::For(world, chunk_bytes);
  const std::string path = Path(name);
  const int fd = shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) return Errno(errno, "shm_open(O_CREAT | O_EXCL)", name);
  FdCloser closer(fd);
  auto fail = [&](int err, absl::string_view what) {
    shm_unlink(path.c_str());
    return Errno(err, what, name);
  };
  // The umask can only remove bits; make the mode exact anyway.
  if (fchmod(fd, S_IRUSR | S_IWUSR) != 0) return fail(errno, "fchmod");
  if (ftruncate(fd, static_cast<off_t>(layout.total_bytes)) != 0) return fail(errno, "ftruncate");
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(layout.total_bytes)); err != 0) {
    absl::Status status = fail(err, absl::StrCat("posix_fallocate of ", layout.total_bytes,
                                                 " bytes (is /dev/shm large enough?)"));
    return status;
  }
  void* base = mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail(errno, "mmap");
  // ftruncate zero-filled the segment: every atomic starts at 0 (a valid value), and
  // every slot at kEmpty. Construct the header's atomics in place all the same.
  auto* header = new (base) ShmGroupHeader;
  header->version = kShmLayoutVersion;
  header->world_size = static_cast<uint32_t>(world);
  header->chunk_bytes = layout.chunk_bytes;
  header->slot_bytes = layout.slot_bytes;
  header->total_bytes = layout.total_bytes;
  header->futex.store(0);
  header->sleepers.store(0);
  auto segment =
      std::unique_ptr<ShmSegment>(new ShmSegment(name, layout, static_cast<char*>(base)));
  for (int r = 0; r < world; ++r) new (&segment->control(r)) ShmSlotControl{};
  header->magic.store(kShmMagic, std::memory_order_release);
  return segment;
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(const std::string& name, int world,
                                                             absl::Time deadline) {
  if (absl::Status valid = ValidateShmName(name); !valid.ok()) return valid;
  const std::string path = Path(name);
  absl::Duration backoff = absl::Microseconds(50);
  std::string last_problem = "it does not exist";
  // Rank 0 may not have created (or finished initializing) the segment yet: retry with
  // a short, growing back-off until the deadline. The instance bootstrap starts every
  // rank at the same moment, so this usually waits a few hundred microseconds.
  while (true) {
    const int fd = shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0 && errno != ENOENT) return Errno(errno, "shm_open", name);
    if (fd >= 0) {
      FdCloser closer(fd);
      struct stat st;
      if (fstat(fd, &st) != 0) return Errno(errno, "fstat", name);
      if (st.st_uid != geteuid() || (st.st_mode & 0077) != 0) {
        return absl::PermissionDeniedError(absl::StrCat(
            "shm segment '", path, "' belongs to uid ", st.st_uid, " with mode ",
            absl::Hex(st.st_mode & 0777), "; expected uid ", geteuid(), " and mode 600"));
      }
      if (static_cast<size_t>(st.st_size) >= kShmPageBytes) {
        void* page = mmap(nullptr, kShmPageBytes, PROT_READ, MAP_SHARED, fd, 0);
        if (page == MAP_FAILED) return Errno(errno, "mmap", name);
        const auto* header = static_cast<const ShmGroupHeader*>(page);
        const bool ready = header->magic.load(std::memory_order_acquire) == kShmMagic;
        const uint32_t version = header->version;
        const int seg_world = static_cast<int>(header->world_size);
        const size_t chunk = header->chunk_bytes;
        const size_t total = header->total_bytes;
        munmap(page, kShmPageBytes);
        if (ready) {
          if (version != kShmLayoutVersion || seg_world != world) {
            return absl::FailedPreconditionError(absl::StrCat(
                "shm segment '", path, "' has layout version ", version, " for ", seg_world,
                " ranks; this rank expects version ", kShmLayoutVersion, " and ", world));
          }
          const ShmLayout layout = ShmLayout::For(world, chunk);
          if (layout.total_bytes != total || static_cast<size_t>(st.st_size) < total) {
            return absl::FailedPreconditionError(
                absl::StrCat("shm segment '", path, "' is ", st.st_size, " bytes, its header says ",
                             total, ", its layout needs ", layout.total_bytes));
          }
          void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
          if (base == MAP_FAILED) return Errno(errno, "mmap", name);
          return std::unique_ptr<ShmSegment>(
              new ShmSegment(name, layout, static_cast<char*>(base)));
        }
      }
      last_problem = "its creator has not initialized it";
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("shm segment '", path, "' not ready before the deadline: ", last_problem));
    }
    absl::SleepFor(std::min(backoff, left));
    backoff = std::min(backoff * 2, absl::Milliseconds(5));
  }
}

}  // namespace internal
}  // namespace lockstep::comm
