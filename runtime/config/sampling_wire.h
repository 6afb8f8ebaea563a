// SamplingParams between the scheduler's struct and the wire (proto/worker.proto), for the
// router (sending) and the worker and the router's gRPC API (receiving).
// On the wire, top_p and repetition_penalty 0 mean "unset" (1, disabled); logit_bias
// comes back sorted by token id. The grammar's kinds have the same numbers on both sides
// (checked below); a kind unknown to this build is refused by the worker's Validate.
#ifndef LOCKSTEP_RUNTIME_CONFIG_SAMPLING_WIRE_H_
#define LOCKSTEP_RUNTIME_CONFIG_SAMPLING_WIRE_H_

#include <algorithm>

#include "proto/worker.pb.h"
#include "scheduler/sampling_params.h"

namespace lockstep::config {

static_assert(static_cast<int>(grammar::GrammarSpec::Kind::kJsonObject) ==
                  v1::GrammarSpec::KIND_JSON_OBJECT &&
              static_cast<int>(grammar::GrammarSpec::Kind::kJsonSchema) ==
                  v1::GrammarSpec::KIND_JSON_SCHEMA &&
              static_cast<int>(grammar::GrammarSpec::Kind::kRegex) == v1::GrammarSpec::KIND_REGEX &&
              static_cast<int>(grammar::GrammarSpec::Kind::kEbnf) == v1::GrammarSpec::KIND_EBNF);

inline void SamplingToWire(const sched::SamplingParams& params, v1::SamplingParams* wire) {
  wire->set_max_tokens(params.max_tokens);
  wire->set_temperature(params.temperature);
  wire->set_top_k(params.top_k);
  wire->set_top_p(params.top_p);
  wire->set_seed(params.seed);
  wire->mutable_stop_token_ids()->Assign(params.stop_token_ids.begin(),
                                         params.stop_token_ids.end());
  wire->set_ignore_eos(params.ignore_eos);
  wire->set_logprobs(params.logprobs);
  wire->set_presence_penalty(params.presence_penalty);
  wire->set_frequency_penalty(params.frequency_penalty);
  wire->set_repetition_penalty(params.repetition_penalty);
  wire->set_min_tokens(params.min_tokens);
  wire->set_num_generated_in_prompt(params.num_generated_in_prompt);
  for (const auto& [token, bias] : params.logit_bias) (*wire->mutable_logit_bias())[token] = bias;
  if (params.grammar.has_value()) {
    wire->mutable_grammar()->set_kind(static_cast<v1::GrammarSpec::Kind>(params.grammar->kind));
    wire->mutable_grammar()->set_text(params.grammar->text);
  }
}

inline sched::SamplingParams SamplingFromWire(const v1::SamplingParams& wire) {
  sched::SamplingParams params;
  params.max_tokens = wire.max_tokens();
  params.temperature = wire.temperature();
  params.top_k = wire.top_k();
  params.top_p = wire.top_p() == 0.0f ? 1.0f : wire.top_p();
  params.seed = wire.seed();
  params.stop_token_ids.assign(wire.stop_token_ids().begin(), wire.stop_token_ids().end());
  params.ignore_eos = wire.ignore_eos();
  params.logprobs = wire.logprobs();
  params.presence_penalty = wire.presence_penalty();
  params.frequency_penalty = wire.frequency_penalty();
  params.repetition_penalty = wire.repetition_penalty() == 0.0f ? 1.0f : wire.repetition_penalty();
  params.min_tokens = wire.min_tokens();
  params.num_generated_in_prompt = wire.num_generated_in_prompt();
  params.logit_bias.assign(wire.logit_bias().begin(), wire.logit_bias().end());
  std::sort(params.logit_bias.begin(), params.logit_bias.end());
  if (wire.has_grammar()) {
    params.grammar = grammar::GrammarSpec{
        static_cast<grammar::GrammarSpec::Kind>(wire.grammar().kind()), wire.grammar().text()};
  }
  return params;
}

}  // namespace lockstep::config

#endif  // LOCKSTEP_RUNTIME_CONFIG_SAMPLING_WIRE_H_
