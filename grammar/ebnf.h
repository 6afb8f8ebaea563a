// File: ebnf.h
//
// EBNF grammars in llama.cpp's GBNF syntax: `name ::= alternatives` rules (the start
// rule is `root`), string literals "..." and character classes [...] / [^...] with
// escapes (\n \r \t \\ \" \] \xHH \uHHHH \UHHHHHHHH), `.` (any character), rule
// names, groups ( ), alternation |, and the repetitions ? * + {m} {m,} {m,n}; `#`
// starts a comment. Literals and classes are Unicode (UTF-8). A rule may continue over
// several lines; it ends where the next `name ::=` starts. Errors are InvalidArgument
// with the line and column.
#ifndef LOCKSTEP_GRAMMAR_EBNF_H_
#define LOCKSTEP_GRAMMAR_EBNF_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"

namespace lockstep::grammar {

absl::StatusOr<Grammar> EbnfGrammar(std::string_view text);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_EBNF_H_
