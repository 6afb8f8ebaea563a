#include "runtime/comm/shm_host_id.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace lockstep::comm {
namespace {

// What an unreadable part becomes: unique to this process, so it matches nobody.
std::string Unknown() { return absl::StrCat("unknown-pid-", getpid()); }

std::string BootId() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!std::getline(file, id)) return Unknown();
  id = std::string(absl::StripAsciiWhitespace(id));
  return id.empty() ? Unknown() : id;
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return Unknown();
  return name;
}

// The tmpfs behind /dev/shm (where shm_open names live): bind mounts of one tmpfs
// share its device number, separate tmpfs mounts (containers) do not.
std::string ShmMount() {
  struct stat st;
  if (stat("/dev/shm", &st) != 0) return Unknown();
  return absl::StrCat("shm-dev:", st.st_dev, ":", st.st_ino);
}

}  // namespace

std::string ShmHostId() { return absl::StrCat(BootId(), "/", HostName(), "/", ShmMount()); }

}  // namespace lockstep::comm
