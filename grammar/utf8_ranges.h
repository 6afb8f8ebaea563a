// File: utf8_ranges.h
//
// Code-point ranges as byte-level grammar expressions: the UTF-8 encodings of the code
// points in the ranges (surrogates never included), as a choice of byte-class sequences.
// Used by the EBNF and regular-expression front ends for character classes.
#ifndef LOCKSTEP_GRAMMAR_UTF8_RANGES_H_
#define LOCKSTEP_GRAMMAR_UTF8_RANGES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/utf8.h"
#include "grammar/grammar.h"

namespace lockstep::grammar {

using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorts and merges overlapping or adjacent ranges.
CodePointRanges NormalizeRanges(CodePointRanges ranges);
// The code points in [0, kMaxCodePoint] outside `ranges`.
CodePointRanges ComplementRanges(const CodePointRanges& ranges);
// The expression matching the UTF-8 encoding of exactly the code points in `ranges`.
Expr Utf8Expr(const CodePointRanges& ranges);
// Decodes the code point at `*i` of `text` and moves `*i` past it; false (and `*i`
// unchanged) on invalid UTF-8.
bool NextCodePoint(std::string_view text, size_t* i, uint32_t* cp);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_UTF8_RANGES_H_
