// File: json_schema.h
//
// JSON Schema (the subset OpenAI's strict structured outputs document) as a grammar of
// the JSON texts that validate: objects (properties in their declared order, required
// ones present, optional ones skippable; additionalProperties false or absent produces
// only declared properties, a schema for it with no properties a map), arrays (items,
// minItems, maxItems), enum, const, anyOf (oneOf is taken as anyOf), allOf of one
// schema, strings (pattern, format: date, time, date-time, email, uuid, uri, ipv4,
// hostname; minLength/maxLength), integers and numbers (minimum, maximum, exclusive
// bounds; a bounded number has at most one fraction and no exponent), booleans, null,
// type lists, and $ref to "#", "#/$defs/..." and "#/definitions/..." (recursion
// allowed). Annotations (title, description, default, ...) are ignored; a validation
// keyword outside the subset is InvalidArgument naming it and where it is.
//
// Lockstep's extension for forced tool calls (runtime/router/http/openai_grammar.h): a
// top-level "x-lockstep-wrap": {"begin": B, "end": E, "separator": S, "repeat": R}
// matches B value E (no whitespace around the value), and with R
// true any number of further S B value E after it.
#ifndef LOCKSTEP_GRAMMAR_JSON_SCHEMA_H_
#define LOCKSTEP_GRAMMAR_JSON_SCHEMA_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"

namespace lockstep::grammar {

absl::StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_text);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_JSON_SCHEMA_H_
