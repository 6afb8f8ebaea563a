// Client API keys: what guards the router's OpenAI API over HTTP (`Authorization:
// Bearer KEY`) and over gRPC (the same header as call metadata), docs/security.md.
// Keys come from `router.api_key` and/or a file with one key per line
// (`router.api_keys_file`); with none, every client is allowed.
//
// Thread safety: immutable after construction; thread-safe.
#ifndef LOCKSTEP_RUNTIME_SECURITY_API_KEYS_H_
#define LOCKSTEP_RUNTIME_SECURITY_API_KEYS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::security {

class ApiKeys {
 public:
  // `key` (empty: none) plus the keys listed in `keys_file` (empty: none).
  static absl::StatusOr<ApiKeys> Load(const std::string& key, const std::string& keys_file);

  ApiKeys() = default;
  // Empty strings in `keys` are ignored (`ApiKeys({config.api_key})` with no key set).
  explicit ApiKeys(std::vector<std::string> keys);

  // False when no key is configured (every client is allowed).
  bool required() const { return !keys_.empty(); }

  // True when no key is required or `key` is one of the keys. Compares against every
  // key in constant time per key, so the time does not reveal which one nearly matched.
  bool Allows(std::string_view key) const;

  // The same for an HTTP `Authorization` header value, which must be "Bearer KEY" (the
  // scheme in any case, then one or more spaces: RFC 7235).
  bool AllowsAuthorization(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_API_KEYS_H_
