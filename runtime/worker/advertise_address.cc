#include "runtime/worker/advertise_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"

namespace lockstep::worker {
namespace {

std::string AddressText(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
              sizeof(text));
  } else if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
              sizeof(text));
  }
  return text;
}

bool IsLoopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr);
    return (ip >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  }
  return false;
}

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace

absl::StatusOr<std::string> RouteAddressTo(const std::string& host_port) {
  absl::StatusOr<HostPort> target = ParseHostPort(host_port);
  if (!target.ok()) return target.status();
  addrinfo hints = {};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(target->port == 0 ? 9 : target->port);
  if (int rc = getaddrinfo(target->host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", target->host, ": ", gai_strerror(rc)));
  }
  absl::StatusOr<std::string> result =
      absl::UnavailableError(absl::StrCat("no route to ", host_port));
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (IsLoopback(a->ai_addr)) {
      result = a->ai_family == AF_INET6 ? "::1" : "127.0.0.1";
      break;
    }
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local = {};
    socklen_t length = sizeof(local);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      result = AddressText(reinterpret_cast<sockaddr*>(&local));
      close(fd);
      break;
    }
    result = absl::UnavailableError(
        absl::StrCat("no route to ", host_port, ": ", std::strerror(errno)));
    close(fd);
  }
  freeaddrinfo(found);
  return result;
}

absl::StatusOr<std::string> InterfaceAddress(const std::string& name) {
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    return absl::UnavailableError(absl::StrCat("getifaddrs: ", std::strerror(errno)));
  }
  std::string v4, v6;
  for (ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || name != i->ifa_name) continue;
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) v4 = AddressText(i->ifa_addr);
    if (i->ifa_addr->sa_family == AF_INET6 && v6.empty()) v6 = AddressText(i->ifa_addr);
  }
  freeifaddrs(interfaces);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  return absl::NotFoundError(absl::StrCat("network interface '", name, "' has no address"));
}

absl::StatusOr<std::string> ResolveAdvertiseHost(const std::string& flag, const Environment& env,
                                                 const std::string& rendezvous) {
  if (!flag.empty()) return flag;
  if (std::optional<std::string> from_env = env("LOCKSTEP_ADVERTISE_ADDRESS");
      from_env.has_value() && !from_env->empty()) {
    return *from_env;
  }
  absl::StatusOr<std::string> routed = RouteAddressTo(rendezvous);
  if (!routed.ok()) {
    return absl::Status(routed.status().code(),
                        absl::StrCat("cannot pick an address to advertise (give "
                                     "--advertise-address): ",
                                     routed.status().message()));
  }
  return routed;
}

absl::StatusOr<std::string> ResolveGlooHost(const Environment& env,
                                            const std::string& advertise_host) {
  const std::optional<std::string> ifname = env("GLOO_SOCKET_IFNAME");
  if (!ifname.has_value() || ifname->empty()) return advertise_host;
  absl::StatusOr<std::string> address = InterfaceAddress(*ifname);
  if (!address.ok()) {
    return absl::Status(address.status().code(),
                        absl::StrCat("GLOO_SOCKET_IFNAME: ", address.status().message()));
  }
  return address;
}

absl::StatusOr<std::string> ListenAddress(const std::string& listen,
                                          const std::string& advertise_host) {
  if (listen.empty()) return HostPort{advertise_host, 0}.ToString();
  absl::StatusOr<HostPort> parsed = ParseHostPort(listen);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen ", parsed.status().message()));
  }
  if (IsWildcard(parsed->host)) parsed->host = advertise_host;
  return parsed->ToString();
}

}  // namespace lockstep::worker
