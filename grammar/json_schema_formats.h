// File: json_schema_formats.h
//
// The string formats the JSON Schema front end constrains, as anchored regular
// expressions over the string's content. Each accepts a subset of what the format
// allows (e.g. dates never use February 29), so every generated string validates.
#ifndef LOCKSTEP_GRAMMAR_JSON_SCHEMA_FORMATS_H_
#define LOCKSTEP_GRAMMAR_JSON_SCHEMA_FORMATS_H_

#include <string>
#include <string_view>

namespace lockstep::grammar {

// The regular expression for `format`, or empty when the format is not constrained.
std::string FormatRegex(std::string_view format);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_JSON_SCHEMA_FORMATS_H_
