#include "tokenizer/clean_up_spaces.h"

#include <utility>

namespace lockstep::tok {
namespace {

// transformers' order: each pass sees the previous passes' output.
constexpr std::pair<std::string_view, std::string_view> kReplacements[] = {
    {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
    {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

// Python's str.replace: every non-overlapping match, left to right.
void ReplaceAll(std::string_view from, std::string_view to, std::string* text) {
  size_t at = text->find(from);
  if (at == std::string::npos) return;
  std::string out;
  out.reserve(text->size());
  size_t copied = 0;
  for (; at != std::string::npos; at = text->find(from, copied)) {
    out.append(*text, copied, at - copied);
    out.append(to);
    copied = at + from.size();
  }
  out.append(*text, copied);
  *text = std::move(out);
}

}  // namespace

std::string CleanUpTokenizationSpaces(std::string_view text) {
  std::string out(text);
  for (const auto& [from, to] : kReplacements) ReplaceAll(from, to, &out);
  return out;
}

}  // namespace lockstep::tok
