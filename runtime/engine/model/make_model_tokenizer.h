// The Hugging Face tokenizer files of make-model's DeepSeek-V3-family presets: a small
// byte-level BPE in the shape of DeepSeek-V3's tokenizer.json (its pre-tokenizer rules:
// digits in runs of up to 3, CJK and kana runs isolated, then its word / punctuation /
// whitespace split, then ByteLevel without a regex; ByteLevel post-processor and
// decoder), a tokenizer_config.json with a chat template of that family's shape
// (<｜begin▁of▁sentence｜>system<｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜>,
// tool calls and tool outputs between their markers) and a generation_config.json.
//
// Ids: 0..255 are the 256 byte symbols (make-model's "next token" structure emits
// them), 256 is BOS, 257 EOS, 258 pad, 259.. the chat and tool markers, then the
// merges, all below the preset's vocab_size.
//
// Pure functions of the config; thread-safe.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_MAKE_MODEL_TOKENIZER_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_MAKE_MODEL_TOKENIZER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {

inline constexpr char kDeepseekBosToken[] = "<｜begin▁of▁sentence｜>";
inline constexpr char kDeepseekEosToken[] = "<｜end▁of▁sentence｜>";
inline constexpr char kDeepseekUserToken[] = "<｜User｜>";
inline constexpr char kDeepseekAssistantToken[] = "<｜Assistant｜>";

// The vocabulary the files need (bytes, special tokens and merges).
int32_t DeepseekTokenizerVocabSize();

// The chat template written to tokenizer_config.json.
const std::string& DeepseekChatTemplate();

// Writes tokenizer.json, tokenizer_config.json and generation_config.json to `dir`.
// InvalidArgument when config's vocab_size, bos or eos ids do not match the layout.
absl::Status WriteDeepseekTokenizer(const ModelConfig& config, const std::string& dir);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_MAKE_MODEL_TOKENIZER_H_
