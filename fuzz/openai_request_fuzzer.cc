// The router's OpenAI request parsing and validation (including the chat messages'
// rendering through the chat template) on arbitrary bodies: each returns a request or
// an error that names the problem, never crashes; the first byte picks the endpoint.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/router/openai_api.h"
#include "runtime/router/request_validation.h"
#include "runtime/router/serving_tokenizer.h"
#include "tokenizer/byte_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using lockstep::router::ApiKind;
  static const auto* tokenizer = new lockstep::router::ServingTokenizer(
      *lockstep::tok::ByteTokenizer::Create(300, 256, 257));
  static const lockstep::router::RequestLimits limits{
      .model = "tiny", .max_prompt_tokens = 256, .vocab_size = 300};
  if (size < 1) return 0;
  const ApiKind kind = data[0] & 1 ? ApiKind::kChat : ApiKind::kCompletion;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  absl::StatusOr<lockstep::router::OpenAiRequest> parsed =
      lockstep::router::ParseOpenAiRequest(kind, body, *tokenizer);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) std::abort();  // errors say what is wrong
    return 0;
  }
  (void)lockstep::router::ValidateRouterRequest(parsed->request, limits);
  return 0;
}
