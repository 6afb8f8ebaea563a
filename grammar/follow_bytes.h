// File: follow_bytes.h
//
// Per rule of a lowered Grammar, the bytes that may come right after the rule finishes,
// in any context (the classic FOLLOW set over bytes; a rule in tail position inherits
// its caller's). A position table (position_table.h) rejects, whatever the stack, a
// token that leaves the position's rule before a byte outside this set, so only tokens
// whose rest may continue are left to the walk from the real stack.
#ifndef LOCKSTEP_GRAMMAR_FOLLOW_BYTES_H_
#define LOCKSTEP_GRAMMAR_FOLLOW_BYTES_H_

#include <vector>

#include "grammar/byte_set.h"
#include "grammar/grammar.h"

namespace lockstep::grammar {

std::vector<ByteSet> FollowBytes(const Grammar& grammar);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_FOLLOW_BYTES_H_
