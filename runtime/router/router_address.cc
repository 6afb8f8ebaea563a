#include "runtime/router/router_address.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace lockstep::router {

using nlohmann::json;

absl::Status WriteRouterAddress(const std::string& path, const RouterAddress& address) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << json{{"http", address.http}, {"grpc", address.grpc}}.dump() << "\n";
    if (!out) return absl::InternalError(fmt::format("cannot write {}", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(fmt::format("cannot rename {} to {}", tmp, path));
  }
  return absl::OkStatus();
}

absl::StatusOr<RouterAddress> ReadRouterAddress(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("no router address file {} (yet)", path));
  std::stringstream text;
  text << in.rdbuf();
  const json parsed = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("http") || !parsed["http"].is_string() ||
      !parsed.contains("grpc") || !parsed["grpc"].is_string()) {
    return absl::DataLossError(
        fmt::format("{} is not a router address file: '{}'", path, text.str().substr(0, 200)));
  }
  return RouterAddress{parsed["http"].get<std::string>(), parsed["grpc"].get<std::string>()};
}

}  // namespace lockstep::router
