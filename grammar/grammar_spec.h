// File: grammar_spec.h
//
// What a request asks its output to match: plain JSON (`json_object`), a JSON Schema,
// a regular expression or an EBNF (GBNF-style) grammar. A value type: the router builds
// it from response_format/tools, the scheduler carries it to every rank, and
// grammar::Compile (matcher.h) turns it into a CompiledGrammar.
#ifndef LOCKSTEP_GRAMMAR_GRAMMAR_SPEC_H_
#define LOCKSTEP_GRAMMAR_GRAMMAR_SPEC_H_

#include <string>

namespace lockstep::grammar {

struct GrammarSpec {
  enum class Kind { kJsonObject, kJsonSchema, kRegex, kEbnf };
  Kind kind = Kind::kJsonObject;
  // The schema (JSON text), regular expression or EBNF; empty for kJsonObject.
  std::string text;

  bool operator==(const GrammarSpec&) const = default;
};

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_GRAMMAR_SPEC_H_
