#include "runtime/security/api_keys.h"

#include <utility>

#include "runtime/security/secret.h"

namespace lockstep::security {

absl::StatusOr<ApiKeys> ApiKeys::Load(const std::string& key, const std::string& keys_file) {
  std::vector<std::string> keys;
  if (!key.empty()) keys.push_back(key);
  if (!keys_file.empty()) {
    absl::StatusOr<std::vector<std::string>> listed = ReadSecretLines(keys_file);
    if (!listed.ok()) return listed.status();
    for (std::string& k : *listed) keys.push_back(std::move(k));
  }
  return ApiKeys(std::move(keys));
}

ApiKeys::ApiKeys(std::vector<std::string> keys) {
  for (std::string& key : keys) {
    if (!key.empty()) keys_.push_back(std::move(key));
  }
}

bool ApiKeys::Allows(std::string_view key) const {
  if (keys_.empty()) return true;
  bool match = false;
  for (const std::string& k : keys_) match |= ConstantTimeEquals(key, k);
  return match;
}

bool ApiKeys::AllowsAuthorization(std::string_view authorization) const {
  if (keys_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return false;
  authorization.remove_prefix(kBearer.size());
  return Allows(authorization);
}

}  // namespace lockstep::security
