#include "runtime/launcher/free_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fmt/format.h"

namespace lockstep::launcher {

absl::StatusOr<int> PickFreePort(const std::string& host) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(fmt::format("not an IPv4 address: '{}'", host));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(fmt::format("socket: {}", strerror(errno)));
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(fmt::format("cannot bind {}:0: {}", host, strerror(error)));
  }
  close(fd);
  return static_cast<int>(ntohs(address.sin_port));
}

}  // namespace lockstep::launcher
