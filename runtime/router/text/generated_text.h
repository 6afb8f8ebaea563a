// The text of one generated sequence, as the client sees it: tokens are detokenized
// incrementally (ServingTokenizer::TextStream, never splitting a character), then cut
// at the first stop string (StopStringMatcher, holding back only what could still
// begin one). Shared by the OpenAI HTTP API and the gRPC API.
//
//   GeneratedText text(tokenizer, request.stop);
//   send(text.Push(delta.token_ids));   // final text so far
//   if (text.stopped()) end the request (finish reason "stop")
//   send(text.Finish());                // at the end
//
// Thread-compatible; must not outlive `tokenizer`.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TEXT_GENERATED_TEXT_H_
#define LOCKSTEP_RUNTIME_ROUTER_TEXT_GENERATED_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "runtime/router/text/stop_strings.h"

namespace lockstep::router {

class GeneratedText {
 public:
  GeneratedText(const ServingTokenizer& tokenizer, std::vector<std::string> stops)
      : stream_(tokenizer.NewTextStream()), stops_(std::move(stops)) {}

  // The text that is final after `ids` (maybe empty); "" once stopped.
  std::string Push(absl::Span<const int32_t> ids) {
    return stops_.stopped() ? "" : stops_.Push(stream_.Push(ids));
  }
  // The rest of the text when the sequence ends ("" after a stop string).
  std::string Finish() {
    if (stops_.stopped()) return "";
    std::string text = stops_.Push(stream_.Flush());
    return text + stops_.Flush();
  }
  // A stop string was reached: the request should end.
  bool stopped() const { return stops_.stopped(); }

 private:
  ServingTokenizer::TextStream stream_;
  StopStringMatcher stops_;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_TEXT_GENERATED_TEXT_H_
