// Compile(): dispatches a GrammarSpec to its front end and binds the grammar to the
// vocabulary.
#include <utility>

#include "grammar/compiled_grammar.h"
#include "grammar/ebnf.h"
#include "grammar/json_rules.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace lockstep::grammar {

namespace {

absl::StatusOr<Grammar> BuildGrammar(const GrammarSpec& spec) {
  absl::StatusOr<Grammar> grammar;
  switch (spec.kind) {
    case GrammarSpec::Kind::kJsonObject:
      grammar = JsonObjectGrammar();
      break;
    case GrammarSpec::Kind::kJsonSchema:
      grammar = JsonSchemaGrammar(spec.text);
      break;
    case GrammarSpec::Kind::kRegex:
      grammar = RegexGrammar(spec.text);
      break;
    case GrammarSpec::Kind::kEbnf:
      grammar = EbnfGrammar(spec.text);
      break;
  }
  return grammar;
}

}  // namespace

absl::Status CheckGrammarSpec(const GrammarSpec& spec) { return BuildGrammar(spec).status(); }

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
    const GrammarSpec& spec, std::shared_ptr<const Vocabulary> vocabulary) {
  absl::StatusOr<Grammar> grammar = BuildGrammar(spec);
  if (!grammar.ok()) return grammar.status();
  return CompiledGrammar::Create(*std::move(grammar), std::move(vocabulary));
}

}  // namespace lockstep::grammar
