#include "tokenizer/utf8_stream_decoder.h"

#include <cstdint>

namespace lockstep::tok {
namespace {

// The shape of a multi-byte sequence that starts with `lead`: its length and the
// allowed range of its second byte (later bytes are always 0x80..0xBF). Length 0 for
// a byte that cannot start a character.
struct LeadInfo {
  int length = 0;
  uint8_t second_lo = 0x80;
  uint8_t second_hi = 0xBF;
};

LeadInfo Classify(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};  // no overlongs
  if (lead == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};  // no overlongs
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};  // <= U+10FFFF
  return {};
}

}  // namespace

std::string Utf8StreamDecoder::Push(std::string_view bytes) {
  std::string buffer = std::move(pending_);
  pending_.clear();
  buffer.append(bytes);
  std::string out;
  out.reserve(buffer.size());
  size_t i = 0;
  while (i < buffer.size()) {
    const uint8_t lead = static_cast<uint8_t>(buffer[i]);
    if (lead < 0x80) {
      out.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    const LeadInfo info = Classify(lead);
    if (info.length == 0) {
      out.append(kReplacementChar);
      ++i;
      continue;
    }
    size_t j = 1;
    bool invalid = false;
    for (; j < static_cast<size_t>(info.length) && i + j < buffer.size(); ++j) {
      const uint8_t b = static_cast<uint8_t>(buffer[i + j]);
      const uint8_t lo = j == 1 ? info.second_lo : 0x80;
      const uint8_t hi = j == 1 ? info.second_hi : 0xBF;
      if (b < lo || b > hi) {
        invalid = true;
        break;
      }
    }
    if (invalid) {
      out.append(kReplacementChar);  // the lead and its valid continuations
      i += j;
      continue;
    }
    if (j < static_cast<size_t>(info.length)) {  // the rest has not arrived yet
      pending_ = buffer.substr(i);
      break;
    }
    out.append(buffer, i, info.length);
    i += info.length;
  }
  return out;
}

std::string Utf8StreamDecoder::Flush() {
  if (pending_.empty()) return "";
  pending_.clear();
  return std::string(kReplacementChar);
}

}  // namespace lockstep::tok
