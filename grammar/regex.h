// File: regex.h
//
// Regular expressions (the ECMAScript subset JSON Schema patterns use) as grammar
// expressions over UTF-8: literals and escapes (\n \t \xHH \uHHHH \u{H..}, identity
// escapes), `.`, classes `[...]` with ranges and negation, \d \w \s \D \W \S,
// groups `( )` and `(?: )`, alternation, `?` `*` `+` `{m}` `{m,}` `{m,n}` (lazy forms
// match the same strings), and `^`/`$` at the ends of the pattern. Back references,
// lookaround and word boundaries are InvalidArgument naming them.
//
// In JSON-string mode the expression matches the JSON encoding of the matched text
// (content of a string literal: '"', '\\' and control characters escaped).
#ifndef LOCKSTEP_GRAMMAR_REGEX_H_
#define LOCKSTEP_GRAMMAR_REGEX_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"

namespace lockstep::grammar {

enum class RegexMode {
  kWholeText,   // the output is exactly a match (the pattern is anchored at both ends)
  kJsonString,  // JSON Schema `pattern`: a JSON string's content; the pattern searches
                // (without ^ / $ anything may come before / after the match)
};

absl::StatusOr<Expr> RegexToExpr(std::string_view pattern, RegexMode mode);

// The grammar of GrammarSpec kRegex.
absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_REGEX_H_
