#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace lockstep::grammar {
namespace {

int EncodedLength(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

std::string Encode(uint32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

// Emits [lo, hi] (same encoded length n) as sequences of byte ranges: splits until
// every byte position varies independently.
void Split(uint32_t lo, uint32_t hi, std::vector<Expr>* out) {
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Split(lo, lo | m, out);
        Split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Split(lo, (hi & ~m) - 1, out);
        Split(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = Encode(lo), b = Encode(hi);
  std::vector<Expr> seq;
  for (int j = 0; j < n; ++j) {
    seq.push_back(
        Expr::Bytes(ByteSet::Range(static_cast<uint8_t>(a[j]), static_cast<uint8_t>(b[j]))));
  }
  out->push_back(Expr::Sequence(std::move(seq)));
}

}  // namespace

bool NextCodePoint(std::string_view text, size_t* i, uint32_t* cp) {
  if (*i >= text.size()) return false;
  const uint8_t b0 = static_cast<uint8_t>(text[*i]);
  int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
  if (n == 0 || *i + n > text.size()) return false;
  uint32_t c = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < n; ++k) {
    const uint8_t b = static_cast<uint8_t>(text[*i + k]);
    if ((b >> 6) != 2) return false;
    c = (c << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[n] || c > kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF)) return false;
  *i += n;
  *cp = c;
  return true;
}

CodePointRanges NormalizeRanges(CodePointRanges ranges) {
  std::sort(ranges.begin(), ranges.end());
  CodePointRanges out;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

CodePointRanges ComplementRanges(const CodePointRanges& ranges) {
  CodePointRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : NormalizeRanges(ranges)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

Expr Utf8Expr(const CodePointRanges& input) {
  // Drop surrogates, then split at the encoded-length boundaries.
  CodePointRanges ranges = NormalizeRanges(input);
  std::vector<Expr> choices;
  ByteSet ascii;
  const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMaxCodePoint);
    std::vector<std::pair<uint32_t, uint32_t>> parts;
    if (lo < 0xD800 && hi > 0xDFFF) {
      parts = {{lo, 0xD7FF}, {0xE000, hi}};
    } else if (lo >= 0xD800 && hi <= 0xDFFF) {
      continue;
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      parts = {{0xE000, hi}};
    } else if (hi >= 0xD800 && hi <= 0xDFFF) {
      parts = {{lo, 0xD7FF}};
    } else {
      parts = {{lo, hi}};
    }
    for (auto [a, b] : parts) {
      for (uint32_t bound : bounds) {
        if (a > b) break;
        if (a > bound) continue;
        const uint32_t end = std::min(b, bound);
        if (bound == 0x7F) {
          ascii.AddRange(static_cast<uint8_t>(a), static_cast<uint8_t>(end));
        } else {
          Split(a, end, &choices);
        }
        a = end + 1;
      }
    }
  }
  if (!ascii.Empty()) choices.insert(choices.begin(), Expr::Bytes(ascii));
  if (choices.empty()) return Expr::Bytes(ByteSet());  // matches nothing
  return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
}

}  // namespace lockstep::grammar
