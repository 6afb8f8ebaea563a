#include "runtime/security/peer_log.h"

#include <utility>

#include "common/log.h"

namespace lockstep::security {
namespace {

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

PeerLog::PeerLog(std::string listener, size_t max_hosts)
    : listener_(std::move(listener)), max_hosts_(max_hosts) {}

bool PeerLog::Note(std::string_view peer, std::string_view what) {
  std::string host = HostOf(peer);
  bool full = false;
  {
    absl::MutexLock lock(&mu_);
    if (hosts_.contains(host)) return false;
    if (hosts_.size() >= max_hosts_) {
      if (said_full_) return false;
      said_full_ = true;
      full = true;
    } else {
      hosts_.insert(host);
    }
  }
  if (full) {
    LOCKSTEP_LOG_WARN("security",
                      "{} refused {} from {}; refusals from {} hosts were logged, refusals "
                      "from further hosts are not",
                      listener_, what, peer, max_hosts_);
  } else {
    LOCKSTEP_LOG_WARN("security", "{} refused {} from {}; further refusals from {} are not logged",
                      listener_, what, peer, host);
  }
  return true;
}

std::string PeerLog::HostOf(std::string_view peer) {
  for (std::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (StartsWith(peer, scheme)) peer.remove_prefix(scheme.size());
  }
  if (StartsWith(peer, "unix:")) return std::string(peer.substr(5));
  if (StartsWith(peer, "[")) {
    const size_t close = peer.find(']');
    if (close != std::string_view::npos) return std::string(peer.substr(1, close - 1));
  }
  const size_t colon = peer.rfind(':');
  if (colon == std::string_view::npos || peer.find(':') != colon) return std::string(peer);
  return std::string(peer.substr(0, colon));
}

}  // namespace lockstep::security
