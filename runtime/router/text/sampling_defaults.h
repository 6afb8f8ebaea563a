// A model's default sampling (generation_config.json: temperature, top_p, top_k,
// repetition_penalty), applied by the OpenAI parser to the fields a request omits, as
// vLLM does. A field the model does not set keeps the OpenAI default (temperature 1,
// top_p 1, top_k and repetition_penalty off). `do_sample` is not read: like vLLM, a
// model's temperature applies as written.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TEXT_SAMPLING_DEFAULTS_H_
#define LOCKSTEP_RUNTIME_ROUTER_TEXT_SAMPLING_DEFAULTS_H_

#include <cstdint>
#include <optional>

namespace lockstep::router {

struct SamplingDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> repetition_penalty;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_TEXT_SAMPLING_DEFAULTS_H_
