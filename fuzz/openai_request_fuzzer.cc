// The router's request parsing and validation on arbitrary bodies: /v1/completions and
// /v1/chat/completions (including the chat messages' rendering through the chat
// template), /v1/tokenize and /v1/detokenize, within the same JSON bounds as the router
// (RequestJsonBounds). Each returns a request or an error that names the problem, and
// never crashes. The first byte picks the endpoint (its two low bits); the rest is the
// body, mutated as JSON (json_mutator.h: deep and wide values) as well as bytewise.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz/json_mutator.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/http/openai_api.h"
#include "runtime/router/http/request_fields.h"
#include "runtime/router/http/tokenize_api.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "tokenizer/byte_tokenizer.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return lockstep::fuzz::MutateJsonInput(data, size, max_size, seed, /*prefix=*/1);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using lockstep::router::ApiKind;
  static const auto* tokenizer = new lockstep::router::ServingTokenizer(
      *lockstep::tok::ByteTokenizer::Create(300, 256, 257));
  static const lockstep::router::RequestLimits limits{
      .model = "tiny", .max_prompt_tokens = 256, .vocab_size = 300};
  if (size < 1) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 2) != 0) {
    const absl::StatusOr<std::string> answer =
        data[0] & 1 ? lockstep::router::Detokenize(body, *tokenizer, limits)
                    : lockstep::router::Tokenize(body, *tokenizer, limits);
    if (!answer.ok() && answer.status().message().empty()) std::abort();
    return 0;
  }
  const ApiKind kind = data[0] & 1 ? ApiKind::kChat : ApiKind::kCompletion;
  absl::StatusOr<lockstep::router::OpenAiRequest> parsed = lockstep::router::ParseOpenAiRequest(
      kind, body, *tokenizer, {}, lockstep::router::RequestJsonBounds(limits));
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) std::abort();  // errors say what is wrong
    return 0;
  }
  (void)lockstep::router::ValidateRouterRequest(parsed->request, limits);
  return 0;
}
