#include "grammar/follow_bytes.h"

namespace lockstep::grammar {

std::vector<ByteSet> FollowBytes(const Grammar& grammar) {
  const size_t n = grammar.rules.size();
  std::vector<bool> nullable(n, false);
  std::vector<ByteSet> first(n), follow(n);
  // Nullable rules and FIRST sets, to a fixpoint (both only grow).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      for (const auto& alt : grammar.rules[r].alternatives) {
        bool all_nullable = true;
        ByteSet bytes = first[r];
        for (const Element& e : alt) {
          if (e.rule < 0) {
            bytes.AddAll(e.bytes);
            all_nullable = false;
            break;
          }
          bytes.AddAll(first[e.rule]);
          if (!nullable[e.rule]) {
            all_nullable = false;
            break;
          }
        }
        if (!(bytes == first[r])) {
          first[r] = bytes;
          changed = true;
        }
        if (all_nullable && !nullable[r]) {
          nullable[r] = true;
          changed = true;
        }
      }
    }
  }
  // FOLLOW: what starts the rest of the alternative after a reference, and the
  // caller's FOLLOW where that rest may be empty.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t a = 0; a < n; ++a) {
      for (const auto& alt : grammar.rules[a].alternatives) {
        for (size_t i = 0; i < alt.size(); ++i) {
          if (alt[i].rule < 0) continue;
          ByteSet bytes = follow[alt[i].rule];
          bool rest_nullable = true;
          for (size_t j = i + 1; j < alt.size() && rest_nullable; ++j) {
            if (alt[j].rule < 0) {
              bytes.AddAll(alt[j].bytes);
              rest_nullable = false;
            } else {
              bytes.AddAll(first[alt[j].rule]);
              rest_nullable = nullable[alt[j].rule];
            }
          }
          if (rest_nullable) bytes.AddAll(follow[a]);
          if (!(bytes == follow[alt[i].rule])) {
            follow[alt[i].rule] = bytes;
            changed = true;
          }
        }
      }
    }
  }
  return follow;
}

}  // namespace lockstep::grammar
