#include "common/host_port.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep {

std::string HostPort::ToString() const {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  auto malformed = [address] {
    return absl::InvalidArgumentError(absl::StrCat("must be host:port, got '", address, "'"));
  };
  absl::string_view host, port_text;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close == 1 || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return malformed();
    }
    host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) return malformed();
    host = address.substr(0, colon);
    if (absl::StrContains(host, ':')) return malformed();  // IPv6 needs brackets
    port_text = address.substr(colon + 1);
  }
  int port = -1;
  const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port must be a number in [0, 65535], got '", address, "'"));
  }
  return HostPort{std::string(host), port};
}

}  // namespace lockstep
