// The addresses a router process bound, for whoever started it with port 0 (the
// launcher, LocalDeployment): `lockstep router --address-file PATH` writes them once
// both servers serve, as {"http": "host:port", "grpc": "host:port"}. The file is
// written next to PATH and renamed into place, so a reader never sees half of it. No
// port is picked in advance and handed over, so none can be taken in between.
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTER_ADDRESS_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTER_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::router {

struct RouterAddress {
  std::string http;  // host:port of the OpenAI HTTP API
  std::string grpc;  // host:port of RouterService and the rendezvous service
};

absl::Status WriteRouterAddress(const std::string& path, const RouterAddress& address);
// NOT_FOUND while there is no file at `path`; DATA_LOSS when it is not what
// WriteRouterAddress writes.
absl::StatusOr<RouterAddress> ReadRouterAddress(const std::string& path);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTER_ADDRESS_H_
