#include "spec_decode/speculative_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockstep::spec {

const char* MethodName(Method method) {
  switch (method) {
    case Method::kNone:
      return "none";
    case Method::kDraftModel:
      return "draft_model";
    case Method::kNgram:
      return "ngram";
    case Method::kMtp:
      return "mtp";
  }
  return "unknown";
}

absl::StatusOr<Method> ParseMethod(std::string_view name) {
  for (Method m : {Method::kNone, Method::kDraftModel, Method::kNgram, Method::kMtp}) {
    if (name == MethodName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown speculative method '", std::string(name), "' (none, draft_model, ngram or mtp)"));
}

namespace {

std::string OutOfRange(int64_t value, int64_t lo, int64_t hi) {
  return absl::StrCat("must be in [", lo, ", ", hi, "], got ", value);
}

}  // namespace

std::vector<ConfigProblem> SpeculativeConfig::Problems() const {
  std::vector<ConfigProblem> problems;
  if (method == Method::kNone) {
    if (num_draft_tokens != 0) {
      problems.push_back(
          {"num_draft_tokens", absl::StrCat("must be 0 with method none, got ", num_draft_tokens)});
    }
    if (dynamic) problems.push_back({"dynamic", "needs a method (draft_model, ngram or mtp)"});
  } else if (num_draft_tokens < 1 || num_draft_tokens > kMaxDraftTokens) {
    problems.push_back({"num_draft_tokens", OutOfRange(num_draft_tokens, 1, kMaxDraftTokens)});
  }
  if (ngram_max < 1 || ngram_max > kMaxNgram) {
    problems.push_back({"ngram_max", OutOfRange(ngram_max, 1, kMaxNgram)});
  }
  return problems;
}

std::string SpeculativeConfig::DraftPoolProblem(kv::DraftMode draft_pool) const {
  if (method == Method::kDraftModel || method == Method::kMtp) {
    if (draft_pool != kv::DraftMode::kNone) return "";
    return absl::StrCat("must be paired or unpaired with speculative.method ", MethodName(method),
                        method == Method::kMtp ? " (the MTP module's KV lives there)"
                                               : " (the draft model's KV lives there)");
  }
  if (draft_pool == kv::DraftMode::kNone) return "";
  return absl::StrCat("must be none with speculative.method ", MethodName(method), " (",
                      method == Method::kNgram ? "it keeps no draft KV" : "nothing drafts",
                      "), got ", kv::DraftModeName(draft_pool));
}

absl::Status SpeculativeConfig::Validate() const {
  const std::vector<ConfigProblem> problems = Problems();
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrJoin(problems, "\n", [](std::string* out, const ConfigProblem& p) {
        absl::StrAppend(out, p.field, ": ", p.message);
      }));
}

int32_t SpeculativeConfig::StepDraftTokens(const DynamicK* request) const {
  if (!enabled()) return 0;
  if (!dynamic || request == nullptr) return num_draft_tokens;
  return std::min<int32_t>(request->k(), num_draft_tokens);
}

}  // namespace lockstep::spec
