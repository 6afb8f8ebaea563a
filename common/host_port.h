// "host:port" addresses: the one parser for listen, connect and advertised addresses.
//
//   ASSIGN_OR_RETURN(HostPort listen, ParseHostPort("127.0.0.1:0"));
//   server.Bind(listen.host, listen.port);
//   std::string bound = listen.WithPort(41234).ToString();  // "127.0.0.1:41234"
//
// An IPv6 host is bracketed in text ("[::1]:80") and held without brackets in `host`,
// as getaddrinfo and bind take it.
#ifndef LOCKSTEP_COMMON_HOST_PORT_H_
#define LOCKSTEP_COMMON_HOST_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

struct HostPort {
  std::string host;  // non-empty; no brackets
  int port = 0;      // [0, 65535]; 0: any free port (listen addresses)

  // "host:port", with brackets around a host that contains ':'.
  std::string ToString() const;
  // The same host with another port (a listen address with the port bound).
  HostPort WithPort(int new_port) const { return {host, new_port}; }

  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// Parses "host:port" or "[ipv6]:port". The host must be non-empty, the port a
// decimal number in [0, 65535]. Otherwise InvalidArgument, "must be host:port, got
// 'ADDRESS'" or "port must be a number in [0, 65535], got 'ADDRESS'", for the caller
// to prefix with what the address is.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_HOST_PORT_H_
