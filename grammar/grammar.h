// File: grammar.h
//
// The byte-level context-free grammar every GrammarSpec compiles to: rules whose
// alternatives are sequences of byte classes and rule references. Front ends (EBNF,
// regular expressions, JSON Schema) describe rule bodies as `Expr` trees and hand them
// to a GrammarBuilder, which lowers choices and repetitions into helper rules
// (repetitions right-recursive, so the parser's tail calls keep stacks flat) and checks
// the result: every rule defined, none left-recursive, every rule able to finish.
//
// Value types; not thread-safe while being built, immutable afterwards.
#ifndef LOCKSTEP_GRAMMAR_GRAMMAR_H_
#define LOCKSTEP_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "grammar/byte_set.h"

namespace lockstep::grammar {

// One element of an alternative: a rule reference when `rule >= 0`, else a byte class.
struct Element {
  int32_t rule = -1;
  ByteSet bytes;
};

struct Rule {
  std::string name;
  std::vector<std::vector<Element>> alternatives;
};

struct Grammar {
  std::vector<Rule> rules;
  int32_t root = 0;
};

// A rule body before lowering.
struct Expr {
  enum class Kind { kBytes, kSequence, kChoice, kRule, kRepeat };
  Kind kind = Kind::kSequence;
  ByteSet bytes;            // kBytes
  int32_t rule = -1;        // kRule
  int min = 0, max = 0;     // kRepeat; max < 0: unbounded
  std::vector<Expr> items;  // kSequence, kChoice; kRepeat: one item

  static Expr Bytes(ByteSet bytes);
  static Expr Byte(uint8_t byte) { return Bytes(ByteSet::Of(byte)); }
  static Expr Literal(std::string_view text);
  static Expr Sequence(std::vector<Expr> items);
  static Expr Choice(std::vector<Expr> items);
  static Expr Ref(int32_t rule);
  static Expr Repeat(Expr item, int min, int max);
  static Expr Empty() { return Sequence({}); }
  static Expr Optional(Expr item) { return Repeat(std::move(item), 0, 1); }
  static Expr Star(Expr item) { return Repeat(std::move(item), 0, -1); }
  static Expr Plus(Expr item) { return Repeat(std::move(item), 1, -1); }
};

class GrammarBuilder {
 public:
  // The most elements a grammar may have after lowering (repetition counts multiply).
  static constexpr int64_t kMaxElements = 1 << 20;
  // The largest finite bound of a repetition.
  static constexpr int kMaxRepeat = 4096;

  // Returns the id of the rule named `name`, declaring it when new.
  int32_t Rule(std::string_view name);
  // A fresh rule named after `hint` (for helper rules of front ends).
  int32_t NewRule(std::string_view hint);
  bool IsDefined(int32_t rule) const { return defined_[rule]; }
  // Defines (or redefines) a rule's body.
  void Define(int32_t rule, Expr body);

  // Lowers and checks; InvalidArgument naming the rule at fault.
  absl::StatusOr<Grammar> Build(int32_t root);

 private:
  // How deep a repetition's item is looked through rule references for its choices,
  // and the most choices taken apart (more: the item stays one alternative).
  static constexpr int kMaxInlineDepth = 2;
  static constexpr size_t kMaxInlineChoices = 64;

  absl::Status LowerAlternative(const Expr& expr, std::vector<Element>* out);
  // The choices of a repetition's item: through nested choices and references to rules
  // whose body is a choice or a byte class (at most kMaxInlineDepth deep).
  void CollectChoices(const Expr& expr, int depth, std::vector<const Expr*>* out) const;
  // One copy of a repetition's item as alternatives (one per choice), lowered.
  absl::StatusOr<std::vector<std::vector<Element>>> CopyAlternatives(const Expr& item);
  absl::StatusOr<int32_t> HelperFor(const Expr& expr);

  std::vector<std::string> names_;
  std::vector<Expr> bodies_;
  std::vector<bool> defined_;
  absl::flat_hash_map<std::string, int32_t> by_name_;
  Grammar grammar_;
  int64_t elements_ = 0;
};

// Checks a lowered grammar: references in range, no left recursion (through nullable
// prefixes too), every rule able to derive a finite string. Used by Build.
absl::Status ValidateGrammar(const Grammar& grammar);

// Debug text of a grammar (one rule a line), for tests and errors.
std::string GrammarToString(const Grammar& grammar);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_GRAMMAR_H_
