// The one acceptance rule of speculative decoding, used by every engine (the CPU
// engine's batch runner, the fake engine).
//
// A step verifies drafts d_0 .. d_{K-1} proposed for the positions after the last
// token. The target's token t_j at each verified position j (0..K) is sampled with the
// request's own counter-based draw for that position, exactly as without speculation.
// d_j is accepted iff d_0 .. d_{j-1} were and d_j == t_j. With a drafts accepted the
// step emits t_0 .. t_a: the accepted drafts (equal to t_0 .. t_{a-1}) and the bonus
// token t_a. For greedy requests this is exact match; for sampled ones it is rejection
// sampling with a deterministic proposal, so the output is token for token the output
// without speculation, for every seed and every drafter (docs/design.md §6).
//
// Pure functions; thread-safe.
#ifndef LOCKSTEP_SPEC_DECODE_ACCEPTANCE_H_
#define LOCKSTEP_SPEC_DECODE_ACCEPTANCE_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"

namespace lockstep::spec {

struct Verdict {
  int accepted = 0;    // drafts accepted (a prefix of the drafts)
  int32_t bonus = 0;   // the target token after them, t_accepted
};

// `target_token(j)` returns t_j; it is called for j = 0, 1, .., accepted, in order,
// once each (so an engine samples only the positions it needs).
Verdict AcceptDrafts(absl::Span<const int32_t> drafts,
                     absl::FunctionRef<int32_t(int)> target_token);

// The same rule over tokens already sampled: `sampled` holds t_0 .. t_K
// (drafts.size() + 1 tokens; more are ignored). CHECKs nothing: fewer tokens than
// needed end the comparison (the last one given is the bonus).
Verdict AcceptDrafts(absl::Span<const int32_t> drafts, absl::Span<const int32_t> sampled);

}  // namespace lockstep::spec

#endif  // LOCKSTEP_SPEC_DECODE_ACCEPTANCE_H_
