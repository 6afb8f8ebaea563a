#include "runtime/executor/sampling_codec.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor/field_count.h"

namespace lockstep::exec {
namespace {

static_assert(FieldCount<sched::SamplingParams>() == 15,
              "a field was added to sched::SamplingParams: encode and decode it below, then "
              "update the count");

bool GetLogitBias(WireReader& r, std::vector<std::pair<int32_t, float>>* bias) {
  uint32_t n = 0;
  if (!r.Get(&n)) return false;
  bias->clear();
  for (uint32_t i = 0; i < n; ++i) {  // no reserve: a truncated input fails first
    std::pair<int32_t, float> entry;
    if (!r.Get(&entry.first) || !r.Get(&entry.second)) return false;
    bias->push_back(entry);
  }
  return true;
}

void PutGrammar(WireWriter& w, const std::optional<grammar::GrammarSpec>& g) {
  static_assert(FieldCount<grammar::GrammarSpec>() == 2,
                "a field was added to grammar::GrammarSpec: encode and decode it below");
  w.PutBool(g.has_value());
  if (!g.has_value()) return;
  w.Put<int32_t>(static_cast<int32_t>(g->kind));
  w.PutString(g->text);
}

bool GetGrammar(WireReader& r, std::optional<grammar::GrammarSpec>* g) {
  bool present = false;
  if (!r.GetBool(&present)) return false;
  if (!present) {
    g->reset();
    return true;
  }
  int32_t kind = 0;
  std::string text;
  if (!r.Get(&kind) || !r.GetString(&text)) return false;
  if (kind < 0 || kind > static_cast<int32_t>(grammar::GrammarSpec::Kind::kEbnf)) return false;
  *g = grammar::GrammarSpec{static_cast<grammar::GrammarSpec::Kind>(kind), std::move(text)};
  return true;
}

}  // namespace

void PutSamplingParams(WireWriter& w, const sched::SamplingParams& s) {
  w.Put(s.max_tokens);
  w.Put(s.temperature);
  w.Put(s.top_k);
  w.Put(s.top_p);
  w.Put(s.seed);
  w.PutVector(s.stop_token_ids);
  w.PutBool(s.ignore_eos);
  w.Put(s.logprobs);
  w.Put(s.presence_penalty);
  w.Put(s.frequency_penalty);
  w.Put(s.repetition_penalty);
  w.Put(s.min_tokens);
  w.Put<uint32_t>(static_cast<uint32_t>(s.logit_bias.size()));
  for (const auto& [token, bias] : s.logit_bias) {
    w.Put(token);
    w.Put(bias);
  }
  w.Put(s.num_generated_in_prompt);
  PutGrammar(w, s.grammar);
}

bool GetSamplingParams(WireReader& r, sched::SamplingParams* s) {
  return r.Get(&s->max_tokens) && r.Get(&s->temperature) && r.Get(&s->top_k) && r.Get(&s->top_p) &&
         r.Get(&s->seed) && r.GetVector(&s->stop_token_ids) && r.GetBool(&s->ignore_eos) &&
         r.Get(&s->logprobs) && r.Get(&s->presence_penalty) && r.Get(&s->frequency_penalty) &&
         r.Get(&s->repetition_penalty) && r.Get(&s->min_tokens) &&
         GetLogitBias(r, &s->logit_bias) && r.Get(&s->num_generated_in_prompt) &&
         GetGrammar(r, &s->grammar);
}

}  // namespace lockstep::exec
