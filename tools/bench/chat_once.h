// One chat completion through the router's OpenAI API (POST /v1/chat/completions, not
// streamed, greedy): what `tools/lockstep demo` sends after its load to show the model's
// chat template at work end to end.
//
// Thread safety: a free function; each call uses its own client.
#ifndef LOCKSTEP_TOOLS_BENCH_CHAT_ONCE_H_
#define LOCKSTEP_TOOLS_BENCH_CHAT_ONCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep::bench {

struct ChatOptions {
  std::string http_address;  // as LoadOptions::http_address
  std::string ca_file;
  std::string model;
  std::string api_key;
  std::string system;  // empty: no system message
  std::string user;
  int64_t max_tokens = 16;
  absl::Duration timeout = absl::Seconds(60);
};

struct ChatReply {
  std::string content;  // choices[0].message.content
  std::string finish_reason;
  int64_t prompt_tokens = 0;  // the rendered template's tokens (usage)
  int64_t completion_tokens = 0;
};

// The reply, or an error naming what failed: the transport, an HTTP status with the
// router's error message, or a response without choices/usage.
absl::StatusOr<ChatReply> ChatOnce(const ChatOptions& options);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_CHAT_ONCE_H_
