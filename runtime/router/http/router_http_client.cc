#include "runtime/router/http/router_http_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/host_port.h"

namespace lockstep::router {

absl::StatusOr<std::unique_ptr<httplib::Client>> NewRouterHttpClient(const std::string& url,
                                                                     const std::string& ca_file) {
  absl::string_view rest = url;
  const bool https = absl::ConsumePrefix(&rest, "https://");
  if (!https) absl::ConsumePrefix(&rest, "http://");
  const absl::StatusOr<HostPort> address = ParseHostPort(rest);
  if (!address.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "router URL '", url, "': give host:port, http://host:port or https://host:port (",
        address.status().message(), ")"));
  }
  auto client = std::make_unique<httplib::Client>(
      absl::StrCat(https ? "https://" : "http://", address->ToString()));
  if (https) {
    client->enable_server_certificate_verification(true);
    if (!ca_file.empty()) client->set_ca_cert_path(ca_file);
  }
  return client;
}

std::string RouterHttpUrl(const config::RouterConfig& router, const std::string& address) {
  return absl::StrCat(router.https_cert_file.empty() ? "http://" : "https://", address);
}

}  // namespace lockstep::router
