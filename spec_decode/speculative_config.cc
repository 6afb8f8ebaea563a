#include "spec_decode/speculative_config.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep::spec {

const char* MethodName(Method method) {
  switch (method) {
    case Method::kNone:
      return "none";
    case Method::kDraftModel:
      return "draft_model";
    case Method::kNgram:
      return "ngram";
  }
  return "unknown";
}

absl::StatusOr<Method> ParseMethod(std::string_view name) {
  for (Method m : {Method::kNone, Method::kDraftModel, Method::kNgram}) {
    if (name == MethodName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown speculative method '", std::string(name), "' (none, draft_model or ngram)"));
}

absl::Status SpeculativeConfig::Validate() const {
  if (method == Method::kNone) {
    if (num_draft_tokens != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "num_draft_tokens must be 0 with method none, got ", num_draft_tokens));
    }
    if (dynamic) return absl::InvalidArgumentError("dynamic needs a method other than none");
  } else if (num_draft_tokens < 1 || num_draft_tokens > kMaxDraftTokens) {
    return absl::InvalidArgumentError(absl::StrCat("num_draft_tokens must be in [1, ",
                                                   kMaxDraftTokens, "] with method ",
                                                   MethodName(method), ", got ",
                                                   num_draft_tokens));
  }
  if (ngram_max < 1 || ngram_max > kMaxNgram) {
    return absl::InvalidArgumentError(
        absl::StrCat("ngram_max must be in [1, ", kMaxNgram, "], got ", ngram_max));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::spec
