#include "runtime/comm/shm_direct.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep::comm::internal {

absl::Status ReadPeerMemory(pid_t pid, uint64_t address, char* dst, size_t n) {
  if (n == 0) return absl::OkStatus();
  if (pid == getpid()) {
    std::memcpy(dst, reinterpret_cast<const void*>(address), n);
    return absl::OkStatus();
  }
  size_t done = 0;
  while (done < n) {
    iovec local = {dst + done, n - done};
    iovec remote = {reinterpret_cast<void*>(address + done), n - done};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == ESRCH) {
      return absl::UnavailableError(absl::StrCat("pid ", pid, " exited"));
    }
    if (got <= 0) {
      return absl::InternalError(absl::StrCat("process_vm_readv of ", n - done, " bytes from pid ",
                                              pid, ": ",
                                              got < 0 ? std::strerror(errno) : "no progress"));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

bool CanReadPeerMemory(pid_t pid, uint64_t address, uint64_t expected) {
  uint64_t value = 0;
  return ReadPeerMemory(pid, address, reinterpret_cast<char*>(&value), sizeof(value)).ok() &&
         value == expected;
}

}  // namespace lockstep::comm::internal
