#include "runtime/worker/draft_stats.h"

#include <algorithm>

namespace lockstep::worker {

void SetDraftStats(const spec::SpeculativeConfig& speculative,
                   const exec::ExecutorCounters& counters, v1::StatsResponse* out) {
  if (speculative.enabled()) {
    v1::DraftTokens* drafts = out->add_drafts_by_method();
    drafts->set_method(spec::MethodName(speculative.method));
    drafts->set_proposed(counters.drafts_proposed);
    drafts->set_accepted(counters.drafts_accepted);
  }
  size_t end = counters.draft_k_steps.size();
  while (end > 0 && counters.draft_k_steps[end - 1] == 0) --end;
  for (size_t k = 0; k < end; ++k) out->add_draft_k_steps(counters.draft_k_steps[k]);
  end = counters.draft_k_requests.size();
  while (end > 0 && counters.draft_k_requests[end - 1] == 0) --end;
  end = std::max(end, static_cast<size_t>(speculative.StepDraftTokens(nullptr)) + 1);
  for (size_t k = 0; k < end; ++k) out->add_draft_k_requests(counters.draft_k_requests[k]);
  // Positions 1.. (index 0 of the counts is unused), up to the last one proposed.
  end = counters.draft_position_proposed.size();
  while (end > 1 && counters.draft_position_proposed[end - 1] == 0) --end;
  for (size_t j = 1; j < end; ++j) {
    out->add_draft_position_proposed(counters.draft_position_proposed[j]);
    out->add_draft_position_accepted(counters.draft_position_accepted[j]);
  }
}

void SetRequestDrafts(spec::Method method, const exec::Response& response,
                      v1::GenerateResponse* out) {
  if (method == spec::Method::kNone || response.drafts_proposed == 0) return;
  v1::DraftTokens* drafts = out->mutable_drafts();
  drafts->set_method(spec::MethodName(method));
  drafts->set_proposed(response.drafts_proposed);
  drafts->set_accepted(response.drafts_accepted);
}

}  // namespace lockstep::worker
