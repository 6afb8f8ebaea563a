// File: testing_match.h
//
// Test-only: whether a text is a complete sentence of a grammar.
#ifndef LOCKSTEP_GRAMMAR_TESTING_MATCH_H_
#define LOCKSTEP_GRAMMAR_TESTING_MATCH_H_

#include <string_view>

#include "grammar/grammar.h"
#include "grammar/parser.h"

namespace lockstep::grammar {

inline bool FullMatch(const Grammar& grammar, std::string_view text) {
  Parser parser(&grammar);
  FrameStore store;
  ParseState state = parser.Start(&store);
  return parser.AdvanceAll(&store, text, &state) && state.can_end;
}

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_TESTING_MATCH_H_
