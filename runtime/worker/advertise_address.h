// The host a rank publishes (its WorkerService, KV transfer service and gloo device):
// one other hosts can reach. Taken from --advertise-address, else
// LOCKSTEP_ADVERTISE_ADDRESS, else the address of the interface that routes to the
// rendezvous (127.0.0.1 only when the rendezvous itself is on this host's loopback).
// A rank listens on that host (port 0 unless given): what it binds is what it
// publishes. GLOO_SOCKET_IFNAME, when set, names the interface of the gloo device.
#ifndef LOCKSTEP_RUNTIME_WORKER_ADVERTISE_ADDRESS_H_
#define LOCKSTEP_RUNTIME_WORKER_ADVERTISE_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/worker/worker_identity.h"

namespace lockstep::worker {

// The local address the kernel would send from to reach `host_port` (no packet is
// sent: a UDP socket is connected, then asked for its name). "127.0.0.1" / "::1" when
// the destination is a loopback address.
absl::StatusOr<std::string> RouteAddressTo(const std::string& host_port);

// The first IPv4 (else IPv6) address of network interface `name` (e.g. "eth0").
absl::StatusOr<std::string> InterfaceAddress(const std::string& name);

// `flag`, else LOCKSTEP_ADVERTISE_ADDRESS, else RouteAddressTo(rendezvous).
absl::StatusOr<std::string> ResolveAdvertiseHost(const std::string& flag, const Environment& env,
                                                 const std::string& rendezvous);

// The host of the gloo device: the address of GLOO_SOCKET_IFNAME when set, else
// `advertise_host`.
absl::StatusOr<std::string> ResolveGlooHost(const Environment& env,
                                            const std::string& advertise_host);

// The address to listen on: `listen` with a wildcard or empty host ("0.0.0.0", "::",
// "") replaced by `advertise_host`; "ADVERTISE_HOST:0" when `listen` is empty.
absl::StatusOr<std::string> ListenAddress(const std::string& listen,
                                          const std::string& advertise_host);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_ADVERTISE_ADDRESS_H_
