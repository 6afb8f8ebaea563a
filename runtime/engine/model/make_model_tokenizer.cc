#include "runtime/engine/model/make_model_tokenizer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::engine {
namespace {

using Json = nlohmann::json;

constexpr int32_t kPadId = 258;

// The chat and tool markers after BOS, EOS and pad: ordinary (not special) added tokens,
// as in DeepSeek-V3's tokenizer, so they survive decoding with skip_special_tokens.
const char* const kMarkers[] = {
    kDeepseekUserToken,        kDeepseekAssistantToken, "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",    "<｜tool▁call▁begin｜>",  "<｜tool▁call▁end｜>",
    "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",   "<｜tool▁sep｜>",
};
constexpr int32_t kFirstMarkerId = 259;
constexpr int32_t kFirstMergeId = kFirstMarkerId + sizeof(kMarkers) / sizeof(kMarkers[0]);

// "Ġ" is the byte-level symbol of a space.
const char* const kMerges[][2] = {
    {"Ġ", "t"},  {"Ġ", "a"},   {"i", "n"},  {"h", "e"},   {"r", "e"},   {"o", "n"},
    {"Ġt", "he"}, {"e", "r"},  {"Ġ", "s"},  {"a", "t"},   {"Ġ", "w"},   {"Ġ", "o"},
    {"e", "n"},  {"Ġ", "c"},   {"i", "s"},  {"a", "n"},   {"o", "r"},   {"e", "s"},
    {"Ġ", "b"},  {"e", "d"},   {"Ġ", "f"},  {"in", "g"},  {"Ġ", "p"},   {"o", "u"},
    {"Ġa", "n"}, {"a", "l"},   {"a", "r"},  {"Ġt", "o"},  {"Ġ", "m"},   {"Ġo", "f"},
    {"Ġ", "in"}, {"Ġ", "d"},   {"Ġ", "h"},  {"Ġan", "d"}, {"i", "c"},   {"a", "s"},
    {"l", "e"},  {"Ġ", "y"},   {"i", "t"},  {"Ġ", "l"},   {"Ġ", "re"},  {"Ġ", "1"},
    {"Ġ", "T"},  {"Ġ", "\""},  {"Ġ", "n"},  {"Ġ", "I"},   {"Ġ", "e"},   {"Ġ", "g"},
};
constexpr int32_t kNumMerges = sizeof(kMerges) / sizeof(kMerges[0]);

// DeepSeek-V3's pre-tokenizer rules (tokenizer.json "pre_tokenizer").
Json PreTokenizer() {
  auto split = [](const char* regex) {
    return Json{{"type", "Split"},
                {"pattern", {{"Regex", regex}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  };
  return {{"type", "Sequence"},
          {"pretokenizers",
           {split(R"(\p{N}{1,3})"),
            split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),
            split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                  "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
                  "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", true},
             {"use_regex", false}}}}};
}

// GPT-2's byte-to-symbol map: printable bytes stand for themselves, the others for
// U+0100 onwards in byte order.
std::string ByteSymbol(int byte) {
  const bool printable =
      (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae);
  int code_point = byte;
  if (!printable) {
    int n = 0;
    for (int b = 0; b < byte; ++b) {
      if (!((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae))) ++n;
    }
    code_point = 256 + n;
  }
  std::string out;
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else {
    out.push_back(static_cast<char>(0xc0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3f)));
  }
  return out;
}

Json AddedToken(int32_t id, const std::string& content, bool special) {
  return {{"id", id},
          {"content", content},
          {"single_word", false},
          {"lstrip", false},
          {"rstrip", false},
          {"normalized", !special},
          {"special", special}};
}

Json ConfigToken(const std::string& content) {
  return {{"__type", "AddedToken"}, {"content", content}, {"lstrip", false},
          {"normalized", true},     {"rstrip", false},    {"single_word", false}};
}

Json TokenizerJson() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteSymbol(b)] = b;
  Json added = Json::array();
  added.push_back(AddedToken(kByteBosToken, kDeepseekBosToken, true));
  added.push_back(AddedToken(kByteEosToken, kDeepseekEosToken, true));
  added.push_back(AddedToken(kPadId, "<｜▁pad▁｜>", true));
  for (int32_t i = 0; i < kFirstMergeId - kFirstMarkerId; ++i) {
    added.push_back(AddedToken(kFirstMarkerId + i, kMarkers[i], false));
  }
  for (const Json& token : added) vocab[token["content"].get<std::string>()] = token["id"];
  Json merges = Json::array();
  for (int32_t i = 0; i < kNumMerges; ++i) {
    const std::string left = kMerges[i][0];
    const std::string right = kMerges[i][1];
    merges.push_back(left + " " + right);
    vocab[left + right] = kFirstMergeId + i;
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", Json::array()}}},
          {"pre_tokenizer", PreTokenizer()},
          {"post_processor",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", false},
            {"use_regex", true}}},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

}  // namespace

int32_t DeepseekTokenizerVocabSize() { return kFirstMergeId + kNumMerges; }

// System messages joined by blank lines after BOS; then each turn: <｜User｜>text,
// <｜Assistant｜>text[tool calls]<｜end▁of▁sentence｜>, tool results grouped between
// <｜tool▁outputs▁begin｜> and <｜tool▁outputs▁end｜> (the assistant's next text
// follows that marker directly); <｜Assistant｜> opens the reply when asked for.
const std::string& DeepseekChatTemplate() {
  static const std::string* const kTemplate = new std::string(absl::StrCat(
      "{%- if add_generation_prompt is not defined %}{%- set add_generation_prompt = false %}"
      "{%- endif %}",
      "{%- set ns = namespace(system='', first_system=true, in_outputs=false) %}",
      "{%- for message in messages %}{%- if message['role'] == 'system' %}",
      "{%- if ns.first_system %}{%- set ns.system = message['content'] %}",
      "{%- set ns.first_system = false %}",
      "{%- else %}{%- set ns.system = ns.system + '\\n\\n' + message['content'] %}{%- endif %}",
      "{%- endif %}{%- endfor %}",
      "{{- bos_token }}{{- ns.system }}",
      "{%- for message in messages %}",
      "{%- if message['role'] == 'user' %}",
      "{%- if ns.in_outputs %}{{- '<｜tool▁outputs▁end｜>' }}{%- set ns.in_outputs = false %}",
      "{%- endif %}",
      "{{- '<｜User｜>' + message['content'] }}",
      "{%- elif message['role'] == 'assistant' %}",
      "{%- if ns.in_outputs %}{{- '<｜tool▁outputs▁end｜>' }}{%- set ns.in_outputs = false %}",
      "{%- else %}{{- '<｜Assistant｜>' }}{%- endif %}",
      "{%- if message['content'] is not none %}{{- message['content'] }}{%- endif %}",
      "{%- if message['tool_calls'] is defined and message['tool_calls'] %}",
      "{{- '<｜tool▁calls▁begin｜>' }}",
      "{%- for tool in message['tool_calls'] %}{%- if not loop.first %}{{- '\\n' }}{%- endif %}",
      "{{- '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name']",
      " + '\\n```json\\n' + tool['function']['arguments'] + '\\n```<｜tool▁call▁end｜>' }}",
      "{%- endfor %}{{- '<｜tool▁calls▁end｜>' }}{%- endif %}",
      "{{- '<｜end▁of▁sentence｜>' }}",
      "{%- elif message['role'] == 'tool' %}",
      "{%- if ns.in_outputs %}{{- '\\n' }}{%- else %}{{- '<｜tool▁outputs▁begin｜>' }}",
      "{%- set ns.in_outputs = true %}{%- endif %}",
      "{{- '<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>' }}",
      "{%- endif %}{%- endfor %}",
      "{%- if ns.in_outputs %}{{- '<｜tool▁outputs▁end｜>' }}",
      "{%- elif add_generation_prompt %}{{- '<｜Assistant｜>' }}{%- endif %}"));
  return *kTemplate;
}

absl::Status WriteDeepseekTokenizer(const ModelConfig& config, const std::string& dir) {
  if (config.vocab_size < DeepseekTokenizerVocabSize() || config.bos_token_id != kByteBosToken ||
      config.eos_token_id != kByteEosToken) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the DeepSeek-style tokenizer needs vocab_size >= ", DeepseekTokenizerVocabSize(),
        ", bos ", kByteBosToken, " and eos ", kByteEosToken, "; the model has ",
        config.vocab_size, ", ", config.bos_token_id, " and ", config.eos_token_id));
  }
  RETURN_IF_ERROR(WriteStringToFile(JoinPath(dir, "tokenizer.json"), TokenizerJson().dump(1)));
  const Json tokenizer_config = {{"add_bos_token", true},
                                 {"add_eos_token", false},
                                 {"bos_token", ConfigToken(kDeepseekBosToken)},
                                 {"eos_token", ConfigToken(kDeepseekEosToken)},
                                 {"pad_token", ConfigToken(kDeepseekEosToken)},
                                 {"clean_up_tokenization_spaces", false},
                                 {"legacy", true},
                                 {"model_max_length", config.max_position},
                                 {"tokenizer_class", "LlamaTokenizerFast"},
                                 {"unk_token", nullptr},
                                 {"chat_template", DeepseekChatTemplate()}};
  RETURN_IF_ERROR(WriteStringToFile(JoinPath(dir, "tokenizer_config.json"),
                                    tokenizer_config.dump(2) + "\n"));
  const Json generation = {{"bos_token_id", config.bos_token_id},
                           {"eos_token_id", config.eos_token_id}};
  return WriteStringToFile(JoinPath(dir, "generation_config.json"), generation.dump(2) + "\n");
}

}  // namespace lockstep::engine
