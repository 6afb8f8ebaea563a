#include "runtime/router/testing/test_tokenizer.h"

#include <string>

namespace lockstep::router::testing {
namespace {

using json = nlohmann::json;

// The GPT-2 byte-level form of byte `b`, as UTF-8.
std::string ByteLevelChar(int b) {
  auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  int code = b;
  if (!printable(b)) {
    code = 256;
    for (int c = 0; c < b; ++c) code += printable(c) ? 0 : 1;
  }
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
  return out;
}

}  // namespace

json TokenizerJson() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelChar(b)] = b;
  vocab["he"] = 256;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e"}}}},
          {"added_tokens",
           {{{"id", 300}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
            {{"id", 301}, {"content", "<s>"}, {"special", true}, {"normalized", false}}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"decoder", {{"type", "ByteLevel"}}}};
}

}  // namespace lockstep::router::testing
