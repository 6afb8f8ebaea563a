#include "runtime/security/api_keys.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
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
  // RFC 7235: credentials = auth-scheme 1*SP token68; the scheme is case-insensitive.
  constexpr std::string_view kBearer = "bearer";
  const auto same_letter = [](char lower, char c) {
    return absl::ascii_tolower(static_cast<unsigned char>(c)) == lower;
  };
  if (authorization.size() <= kBearer.size() ||
      !std::equal(kBearer.begin(), kBearer.end(), authorization.begin(), same_letter) ||
      authorization[kBearer.size()] != ' ') {
    return false;
  }
  authorization.remove_prefix(kBearer.size());
  while (!authorization.empty() && authorization.front() == ' ') authorization.remove_prefix(1);
  return Allows(authorization);
}

}  // namespace lockstep::security
