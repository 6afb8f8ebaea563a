// File: json_rules.h
//
// The JSON pieces every JSON grammar shares (RFC 8259), added to a GrammarBuilder:
// bounded whitespace, strings (valid UTF-8, escapes), numbers and any value. Bounds keep
// a sampler from looping forever: at most kMaxWhitespace whitespace bytes in a row and
// at most kMaxDigits digits in a number part.
#ifndef LOCKSTEP_GRAMMAR_JSON_RULES_H_
#define LOCKSTEP_GRAMMAR_JSON_RULES_H_

#include <cstdint>

#include "grammar/grammar.h"

namespace lockstep::grammar {

inline constexpr int kMaxWhitespace = 16;
inline constexpr int kMaxDigits = 16;

struct JsonRules {
  int32_t ws = -1;           // whitespace, 0 to kMaxWhitespace bytes
  int32_t string_char = -1;  // one character of a string's content (escaped or not)
  int32_t string = -1;       // a whole string, quotes included
  int32_t integer = -1;      // -?(0|[1-9][0-9]*)
  int32_t number = -1;       // integer, fraction, exponent
  int32_t value = -1;        // any JSON value
  int32_t object = -1;       // any JSON object
  int32_t array = -1;        // any JSON array
};

// Adds (once per builder: call it once) the rules above.
JsonRules AddJsonRules(GrammarBuilder* builder);

// The grammar of `response_format: json_object`: an object, with whitespace around it.
absl::StatusOr<Grammar> JsonObjectGrammar();

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_JSON_RULES_H_
