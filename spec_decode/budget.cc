#include "spec_decode/budget.h"

#include <algorithm>

namespace lockstep::spec {

Grant GenerationGrant(int32_t num_draft_tokens, kv::DraftMode draft_pool) {
  const int64_t tokens = 1 + int64_t{num_draft_tokens};
  return Grant{num_draft_tokens, tokens, draft_pool == kv::DraftMode::kNone ? 0 : tokens};
}

Grant ContextGrant(int64_t chunk_tokens, bool last_chunk, int32_t num_draft_tokens,
                   kv::DraftMode draft_pool) {
  const int32_t k = last_chunk ? num_draft_tokens : 0;
  Grant grant{k, chunk_tokens, 0};
  if (draft_pool == kv::DraftMode::kNone) return grant;  // drafts without KV (n-gram)
  grant.draft_tokens = chunk_tokens + k;
  if (draft_pool == kv::DraftMode::kPaired) grant.target_tokens = grant.draft_tokens;
  return grant;
}

int32_t CapDraftTokens(int32_t num_draft_tokens, int64_t position, int64_t max_position) {
  if (max_position <= 0) return num_draft_tokens;
  const int64_t left = max_position - 1 - position;
  if (left < 0) return -1;
  return static_cast<int32_t>(std::min<int64_t>(num_draft_tokens, left));
}

}  // namespace lockstep::spec
