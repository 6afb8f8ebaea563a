// Logs refused callers once per peer host (docs/security.md §1): the first refusal from
// a host is a warning naming the caller's address and why; later ones from that host
// are not logged (their listener counts them). At most `max_hosts` hosts are
// remembered, so a scan from many addresses cannot grow memory without bound: past
// that, one line says so and refusals from new hosts are not logged.
//
//   static PeerLog* log = new PeerLog("data plane");
//   log->Note("10.0.0.7:51234", "a connection: wrong cluster token");
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_SECURITY_PEER_LOG_H_
#define LOCKSTEP_RUNTIME_SECURITY_PEER_LOG_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::security {

class PeerLog {
 public:
  // `listener` names where the refusals happen in the log lines ("gRPC", "data plane").
  explicit PeerLog(std::string listener, size_t max_hosts = 1024);
  PeerLog(const PeerLog&) = delete;
  PeerLog& operator=(const PeerLog&) = delete;

  // Logs "<listener> refused <what> from <peer>" unless a refusal from the peer's host
  // was logged already (or the set of hosts is full). Returns whether it logged.
  bool Note(std::string_view peer, std::string_view what) ABSL_LOCKS_EXCLUDED(mu_);

  // The host of `peer`: "ip:port", "[ipv6]:port", or gRPC's "ipv4:ip:port",
  // "ipv6:[ip]:port" and "unix:path" (the path).
  static std::string HostOf(std::string_view peer);

 private:
  const std::string listener_;
  const size_t max_hosts_;
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> hosts_ ABSL_GUARDED_BY(mu_);
  bool said_full_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_PEER_LOG_H_
