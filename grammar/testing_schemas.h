// File: testing_schemas.h
//
// Test-only: seeded random JSON Schemas over the subset the JSON Schema front end
// supports (objects with required/optional properties, arrays with bounds, enums,
// consts, anyOf, type lists, strings with lengths, patterns and formats, bounded
// integers and numbers, booleans, null, $defs/$ref including recursion), and a
// generator that samples a constrained output with random logits at temperature 1.
#ifndef LOCKSTEP_GRAMMAR_TESTING_SCHEMAS_H_
#define LOCKSTEP_GRAMMAR_TESTING_SCHEMAS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grammar/matcher.h"

namespace lockstep::grammar {

// The benchmarks' schema (grammar_bench, the engine's grammar_overlap_bench): a
// tool call's arguments (an enum name; a string of maxLength 64, an enum, a bounded
// integer, a boolean, a date, an array of up to 5 strings and an unbounded string).
std::string ToolCallBenchSchema();

// The JSON text of a random schema for `seed`.
std::string RandomSchema(uint32_t seed);

// Samples tokens through a Matcher of `grammar` (logits ~ N(0, 1), softmax at
// temperature 1 over the allowed tokens, seeded) until it accepts a stop token; the
// output's bytes. Internal (a token the mask allows that AcceptToken refuses, a dead
// end, more than `max_tokens`) names what happened.
absl::StatusOr<std::string> SampleConstrained(std::shared_ptr<const CompiledGrammar> grammar,
                                              uint32_t seed, int max_tokens);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_TESTING_SCHEMAS_H_
