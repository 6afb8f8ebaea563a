#include "grammar/grammar.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep::grammar {

Expr Expr::Bytes(ByteSet bytes) {
  Expr e;
  e.kind = Kind::kBytes;
  e.bytes = bytes;
  return e;
}

Expr Expr::Literal(std::string_view text) {
  std::vector<Expr> items;
  items.reserve(text.size());
  for (char c : text) items.push_back(Byte(static_cast<uint8_t>(c)));
  return Sequence(std::move(items));
}

Expr Expr::Sequence(std::vector<Expr> items) {
  Expr e;
  e.kind = Kind::kSequence;
  e.items = std::move(items);
  return e;
}

Expr Expr::Choice(std::vector<Expr> items) {
  Expr e;
  e.kind = Kind::kChoice;
  e.items = std::move(items);
  return e;
}

Expr Expr::Ref(int32_t rule) {
  Expr e;
  e.kind = Kind::kRule;
  e.rule = rule;
  return e;
}

Expr Expr::Repeat(Expr item, int min, int max) {
  Expr e;
  e.kind = Kind::kRepeat;
  e.min = min;
  e.max = max;
  e.items.push_back(std::move(item));
  return e;
}

int32_t GrammarBuilder::Rule(std::string_view name) {
  auto it = by_name_.find(std::string(name));
  if (it != by_name_.end()) return it->second;
  int32_t id = static_cast<int32_t>(names_.size());
  names_.emplace_back(name);
  bodies_.emplace_back();
  defined_.push_back(false);
  by_name_.emplace(std::string(name), id);
  return id;
}

int32_t GrammarBuilder::NewRule(std::string_view hint) {
  std::string name(hint);
  for (int i = 1; by_name_.contains(name); ++i) name = absl::StrCat(std::string(hint), "-", i);
  return Rule(name);
}

void GrammarBuilder::Define(int32_t rule, Expr body) {
  bodies_[rule] = std::move(body);
  defined_[rule] = true;
}

absl::StatusOr<int32_t> GrammarBuilder::HelperFor(const Expr& choice) {
  int32_t id = static_cast<int32_t>(grammar_.rules.size());
  grammar_.rules.push_back({absl::StrCat("_alt", id), {}});
  for (const Expr& item : choice.items) {
    std::vector<Element> alt;
    absl::Status s = LowerAlternative(item, &alt);
    if (!s.ok()) return s;
    grammar_.rules[id].alternatives.push_back(std::move(alt));
  }
  return id;
}

absl::Status GrammarBuilder::LowerAlternative(const Expr& expr, std::vector<Element>* out) {
  switch (expr.kind) {
    case Expr::Kind::kBytes:
      out->push_back({-1, expr.bytes});
      break;
    case Expr::Kind::kRule:
      out->push_back({expr.rule, {}});
      break;
    case Expr::Kind::kSequence:
      for (const Expr& item : expr.items) {
        absl::Status s = LowerAlternative(item, out);
        if (!s.ok()) return s;
      }
      break;
    case Expr::Kind::kChoice: {
      if (expr.items.size() == 1) return LowerAlternative(expr.items[0], out);
      absl::StatusOr<int32_t> helper = HelperFor(expr);
      if (!helper.ok()) return helper.status();
      out->push_back({*helper, {}});
      break;
    }
    case Expr::Kind::kRepeat: {
      if (expr.min < 0 || (expr.max >= 0 && expr.max < expr.min)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("invalid repetition bounds {%d,%d}", expr.min, expr.max));
      }
      if (expr.min > kMaxRepeat || expr.max > kMaxRepeat) {
        return absl::InvalidArgumentError(
            absl::StrFormat("repetition bound %d is above the supported %d",
                            std::max(expr.min, expr.max), kMaxRepeat));
      }
      std::vector<Element> item;
      absl::Status s = LowerAlternative(expr.items[0], &item);
      if (!s.ok()) return s;
      if (item.empty()) break;
      // The optional copies (and a star's loop) take the item's choices as their own
      // alternatives, each followed by the next copy in tail position, so a token that
      // stays inside the repetition never leaves the rule of its first byte and a
      // position table accepts it whatever the stack below (position_table.h). Without
      // this, a maxLength string's tokens all left a one-character rule after one byte.
      absl::StatusOr<std::vector<std::vector<Element>>> copy = CopyAlternatives(expr.items[0]);
      if (!copy.ok()) return copy.status();
      int64_t copy_size = 0;
      for (const auto& alt : *copy) copy_size += static_cast<int64_t>(alt.size()) + 1;
      const int64_t optional = expr.max < 0 ? 1 : expr.max - expr.min;
      elements_ += expr.min * static_cast<int64_t>(item.size() + 1) + optional * copy_size;
      if (elements_ > kMaxElements) {
        return absl::InvalidArgumentError("the grammar is too large after expanding repetitions");
      }
      for (int i = 0; i < expr.min; ++i) out->insert(out->end(), item.begin(), item.end());
      // A rule of the copy's alternatives, each followed by `next` (none when < 0), or empty.
      auto add_copy_rule = [&](const char* name, int32_t next, bool self) {
        const int32_t id = static_cast<int32_t>(grammar_.rules.size());
        std::vector<std::vector<Element>> alternatives = *copy;
        for (auto& alt : alternatives) {
          if (self) alt.push_back({id, {}});
          else if (next >= 0) alt.push_back({next, {}});
        }
        alternatives.emplace_back();
        grammar_.rules.push_back({absl::StrCat(name, id), std::move(alternatives)});
        return id;
      };
      if (expr.max < 0) {
        out->push_back({add_copy_rule("_star", -1, /*self=*/true), {}});
      } else if (expr.max > expr.min) {
        int32_t previous = -1;
        for (int i = 0; i < expr.max - expr.min; ++i) {
          previous = add_copy_rule("_opt", previous, /*self=*/false);
        }
        out->push_back({previous, {}});
      }
      break;
    }
  }
  elements_ += 1;
  if (elements_ > kMaxElements) {
    return absl::InvalidArgumentError("the grammar is too large after expanding repetitions");
  }
  return absl::OkStatus();
}

void GrammarBuilder::CollectChoices(const Expr& expr, int depth,
                                    std::vector<const Expr*>* out) const {
  if (expr.kind == Expr::Kind::kChoice) {
    for (const Expr& item : expr.items) CollectChoices(item, depth, out);
  } else if (expr.kind == Expr::Kind::kRule && depth < kMaxInlineDepth &&
             expr.rule < static_cast<int32_t>(bodies_.size()) && defined_[expr.rule] &&
             (bodies_[expr.rule].kind == Expr::Kind::kChoice ||
              bodies_[expr.rule].kind == Expr::Kind::kBytes)) {
    CollectChoices(bodies_[expr.rule], depth + 1, out);
  } else {
    out->push_back(&expr);
  }
}

absl::StatusOr<std::vector<std::vector<Element>>> GrammarBuilder::CopyAlternatives(
    const Expr& item) {
  std::vector<const Expr*> choices;
  CollectChoices(item, 0, &choices);
  std::vector<std::vector<Element>> out;
  if (choices.size() <= kMaxInlineChoices) {
    for (const Expr* choice : choices) {
      std::vector<Element> alt;
      absl::Status s = LowerAlternative(*choice, &alt);
      if (!s.ok()) return s;
      if (alt.empty()) break;  // a nullable choice: keep the item whole
      out.push_back(std::move(alt));
    }
    if (out.size() == choices.size()) return out;
    out.clear();
  }
  std::vector<Element> whole;
  absl::Status s = LowerAlternative(item, &whole);
  if (!s.ok()) return s;
  out.push_back(std::move(whole));
  return out;
}

absl::StatusOr<Grammar> GrammarBuilder::Build(int32_t root) {
  grammar_ = Grammar();
  elements_ = 0;
  grammar_.rules.resize(names_.size());
  for (size_t i = 0; i < names_.size(); ++i) {
    grammar_.rules[i].name = names_[i];
    if (!defined_[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule '", names_[i], "' is used but never defined"));
    }
  }
  for (size_t i = 0; i < names_.size(); ++i) {
    const Expr& body = bodies_[i];
    std::vector<const Expr*> alternatives;
    if (body.kind == Expr::Kind::kChoice) {
      for (const Expr& item : body.items) alternatives.push_back(&item);
    } else {
      alternatives.push_back(&body);
    }
    for (const Expr* alt_expr : alternatives) {
      std::vector<Element> alt;
      absl::Status s = LowerAlternative(*alt_expr, &alt);
      if (!s.ok())
        return absl::InvalidArgumentError(absl::StrCat("rule '", names_[i], "': ", s.message()));
      grammar_.rules[i].alternatives.push_back(std::move(alt));
    }
  }
  grammar_.root = root;
  absl::Status s = ValidateGrammar(grammar_);
  if (!s.ok()) return s;
  return std::move(grammar_);
}

namespace {

// DFS colors for the left-recursion search.
enum class Color { kWhite, kGrey, kBlack };

bool FindCycle(const std::vector<std::vector<int32_t>>& edges, int32_t node,
               std::vector<Color>* color, int32_t* culprit) {
  (*color)[node] = Color::kGrey;
  for (int32_t next : edges[node]) {
    if ((*color)[next] == Color::kGrey) {
      *culprit = next;
      return true;
    }
    if ((*color)[next] == Color::kWhite && FindCycle(edges, next, color, culprit)) return true;
  }
  (*color)[node] = Color::kBlack;
  return false;
}

// A readable name: helper rules (named "_...") are reported by the first named rule
// that reaches them.
std::string RuleName(const Grammar& g, int32_t rule) { return g.rules[rule].name; }

}  // namespace

absl::Status ValidateGrammar(const Grammar& g) {
  const int32_t n = static_cast<int32_t>(g.rules.size());
  if (g.root < 0 || g.root >= n) return absl::InvalidArgumentError("the grammar has no root rule");
  for (const Rule& rule : g.rules) {
    for (const auto& alt : rule.alternatives) {
      for (const Element& e : alt) {
        if (e.rule >= n) return absl::InvalidArgumentError("a rule reference is out of range");
      }
    }
  }
  // Nullable and productive rules (fixpoints).
  std::vector<bool> nullable(n, false), productive(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n; ++r) {
      for (const auto& alt : g.rules[r].alternatives) {
        bool all_nullable = true, all_productive = true;
        for (const Element& e : alt) {
          all_nullable &= e.rule >= 0 && nullable[e.rule];
          all_productive &= e.rule >= 0 ? bool(productive[e.rule]) : !e.bytes.Empty();
        }
        if (all_nullable && !nullable[r]) nullable[r] = changed = true;
        if (all_productive && !productive[r]) productive[r] = changed = true;
      }
    }
  }
  // Reachable rules, and left edges (a reference preceded only by nullable elements).
  std::vector<std::vector<int32_t>> left(n);
  std::vector<bool> reachable(n, false);
  std::vector<int32_t> work = {g.root};
  reachable[g.root] = true;
  while (!work.empty()) {
    int32_t r = work.back();
    work.pop_back();
    for (const auto& alt : g.rules[r].alternatives) {
      bool prefix_nullable = true;
      for (const Element& e : alt) {
        if (e.rule >= 0) {
          if (prefix_nullable) left[r].push_back(e.rule);
          if (!reachable[e.rule]) {
            reachable[e.rule] = true;
            work.push_back(e.rule);
          }
        }
        prefix_nullable &= e.rule >= 0 && nullable[e.rule];
      }
    }
  }
  for (int32_t r = 0; r < n; ++r) {
    if (reachable[r] && !productive[r]) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule '", RuleName(g, r),
                       "' can never finish (each alternative needs itself "
                       "again or an empty character class)"));
    }
  }
  std::vector<Color> color(n, Color::kWhite);
  for (int32_t r = 0; r < n; ++r) {
    int32_t culprit = -1;
    if (reachable[r] && color[r] == Color::kWhite && FindCycle(left, r, &color, &culprit)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rule '", RuleName(g, culprit),
          "' is left-recursive (it can reach itself "
          "before reading a byte; a repetition of something that may be empty does this)"));
    }
  }
  return absl::OkStatus();
}

std::string GrammarToString(const Grammar& g) {
  std::string out;
  for (size_t r = 0; r < g.rules.size(); ++r) {
    absl::StrAppend(&out, r, " ", g.rules[r].name, " ::=");
    for (size_t a = 0; a < g.rules[r].alternatives.size(); ++a) {
      if (a > 0) absl::StrAppend(&out, " |");
      for (const Element& e : g.rules[r].alternatives[a]) {
        if (e.rule >= 0) {
          absl::StrAppend(&out, " <", e.rule, ">");
        } else if (e.bytes.Count() == 1) {
          for (int b = 0; b < 256; ++b) {
            if (e.bytes.Contains(b)) absl::StrAppendFormat(&out, " %02x", b);
          }
        } else {
          absl::StrAppendFormat(&out, " [%d]", e.bytes.Count());
        }
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace lockstep::grammar
