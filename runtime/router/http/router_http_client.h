// Clients of the router's HTTP API for the deployment's own tools (the launcher's
// /health polling, LocalDeployment, `lockstep bench`), over HTTP or HTTPS:
//
//   ASSIGN_OR_RETURN(auto client, NewRouterHttpClient("https://10.0.0.5:8000", ca_file));
//   httplib::Result r = client->Get("/health");
//
// An HTTPS router's certificate must be signed by a CA in `ca_file` (empty: the
// system's trusted CAs) and name the host dialled (docs/security.md §2).
//
// Thread safety: functions; a client is used by one thread at a time.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_ROUTER_HTTP_CLIENT_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_ROUTER_HTTP_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "httplib.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::router {

// A client of the router at `url`: "host:port" or "http://host:port" (HTTP),
// "https://host:port" (HTTPS). InvalidArgument for anything else, naming it.
absl::StatusOr<std::unique_ptr<httplib::Client>> NewRouterHttpClient(const std::string& url,
                                                                     const std::string& ca_file);

// The URL of the HTTP API of a router configured by `router` that bound `address`
// ("host:port"): "https://address" when router.https_cert_file is set, else "http://address".
std::string RouterHttpUrl(const config::RouterConfig& router, const std::string& address);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_ROUTER_HTTP_CLIENT_H_
