#include "runtime/security/token_check.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "runtime/security/secret.h"

namespace lockstep::security {
namespace {

std::atomic<int64_t> rejected_calls{0};

}  // namespace

TokenCheck::TokenCheck(std::string token, std::vector<std::string> open_methods)
    : token_(std::move(token)), open_methods_(std::move(open_methods)) {}

const char* TokenCheck::Refusal(std::string_view method,
                                std::optional<std::string_view> presented) const {
  if (token_.empty()) return nullptr;
  if (presented.has_value() && ConstantTimeEquals(*presented, token_)) return nullptr;
  if (std::find(open_methods_.begin(), open_methods_.end(), method) != open_methods_.end()) {
    return nullptr;
  }
  rejected_calls.fetch_add(1, std::memory_order_relaxed);
  return presented.has_value() ? "wrong cluster token" : "no cluster token";
}

int64_t RejectedCalls() { return rejected_calls.load(std::memory_order_relaxed); }

}  // namespace lockstep::security
