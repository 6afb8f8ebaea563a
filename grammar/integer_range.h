// File: integer_range.h
//
// Decimal integers within bounds as a grammar expression (JSON number syntax: no
// leading zeros, "-0" never produced), for JSON Schema minimum/maximum.
#ifndef LOCKSTEP_GRAMMAR_INTEGER_RANGE_H_
#define LOCKSTEP_GRAMMAR_INTEGER_RANGE_H_

#include <cstdint>

#include "grammar/grammar.h"

namespace lockstep::grammar {

// |bounds| up to this are supported.
inline constexpr int64_t kMaxIntegerBound = 1'000'000'000'000'000'000;

// The integers in [lo, hi] (lo <= hi, both within ±kMaxIntegerBound).
Expr IntegerRangeExpr(int64_t lo, int64_t hi);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_INTEGER_RANGE_H_
