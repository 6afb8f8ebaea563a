#include "tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_data.h"

namespace lockstep::tok {
namespace {

namespace ud = unicode_data;

// Hangul syllables are composed and decomposed by arithmetic (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// Canonical combining class rank (0 for starters).
uint32_t Rank(char32_t cp) {
  if (cp < 0x300) return 0;
  const ud::CombiningRank* end = ud::kCombiningRanks + ud::kCombiningRanksSize;
  const ud::CombiningRank* it =
      std::lower_bound(ud::kCombiningRanks, end, cp,
                       [](const ud::CombiningRank& r, char32_t c) { return r.code_point < c; });
  return it != end && it->code_point == cp ? it->rank : 0;
}

const ud::Decomposition* FindDecomposition(char32_t cp) {
  const ud::Decomposition* end = ud::kDecompositions + ud::kDecompositionsSize;
  const ud::Decomposition* it =
      std::lower_bound(ud::kDecompositions, end, cp,
                       [](const ud::Decomposition& d, char32_t c) { return d.code_point < c; });
  return it != end && it->code_point == cp ? it : nullptr;
}

// The primary composite of (first, second), or 0.
char32_t Compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const ud::Composition* end = ud::kCompositions + ud::kCompositionsSize;
  const ud::Composition* it =
      std::lower_bound(ud::kCompositions, end, std::pair{first, second},
                       [](const ud::Composition& c, const std::pair<char32_t, char32_t>& key) {
                         return c.first != key.first ? c.first < key.first : c.second < key.second;
                       });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

// Code points NFC may change or join to what precedes them: non-starters, the second
// halves of compositions (Hangul vowels and trailing consonants included), and code
// points with a decomposition. Everything else is a boundary NFC never crosses.
class InterestingSet {
 public:
  InterestingSet() : bits_((0x110000 + 63) / 64) {
    for (size_t i = 0; i < ud::kCombiningRanksSize; ++i) Set(ud::kCombiningRanks[i].code_point);
    for (size_t i = 0; i < ud::kCompositionsSize; ++i) Set(ud::kCompositions[i].second);
    for (size_t i = 0; i < ud::kDecompositionsSize; ++i) Set(ud::kDecompositions[i].code_point);
    for (char32_t cp = kVBase; cp < kVBase + kVCount; ++cp) Set(cp);
    for (char32_t cp = kTBase + 1; cp < kTBase + kTCount; ++cp) Set(cp);
  }
  // For NFC: code points below U+0300 change only with a mark after them, which is
  // interesting itself. For NFD: every code point with a decomposition.
  bool Contains(char32_t cp, bool compose) const {
    if (compose) return cp >= 0x300 && Bit(cp);
    return Bit(cp) || (cp >= kSBase && cp < kSBase + kSCount);
  }

 private:
  bool Bit(char32_t cp) const { return (bits_[cp >> 6] >> (cp & 63) & 1) != 0; }
  void Set(char32_t cp) { bits_[cp >> 6] |= uint64_t{1} << (cp & 63); }
  std::vector<uint64_t> bits_;
};

const InterestingSet& Interesting() {
  static const auto* set = new InterestingSet;
  return *set;
}

void Decompose(char32_t cp, std::vector<char32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  if (const ud::Decomposition* d = FindDecomposition(cp)) {
    out->insert(out->end(), ud::kDecompositionData + d->offset,
                ud::kDecompositionData + d->offset + d->length);
    return;
  }
  out->push_back(cp);
}

// Normalizes one span that starts at a starter (or at the text's start): NFC, or NFD
// without `compose`.
void NormalizeSpan(std::string_view span, bool compose, std::string* out) {
  std::vector<char32_t> cps;
  for (size_t i = 0; i < span.size();) Decompose(NextCodePoint(span, &i), &cps);
  // Canonical ordering: a stable sort of each run of non-starters by class.
  std::vector<uint32_t> ranks(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) ranks[i] = Rank(cps[i]);
  for (size_t i = 1; i < cps.size(); ++i) {
    for (size_t j = i; j > 0 && ranks[j] != 0 && ranks[j - 1] > ranks[j]; --j) {
      std::swap(cps[j], cps[j - 1]);
      std::swap(ranks[j], ranks[j - 1]);
    }
  }
  if (!compose) {
    for (const char32_t cp : cps) AppendUtf8(cp, out);
    return;
  }
  // Canonical composition: join each code point to the last starter unless blocked.
  size_t kept = 0;
  ptrdiff_t starter = -1;
  uint32_t last_rank = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t rank = ranks[i];
    if (starter >= 0 && (last_rank < rank || (last_rank == 0 && kept == size_t(starter) + 1))) {
      if (const char32_t c = Compose(cps[starter], cps[i])) {
        cps[starter] = c;
        continue;
      }
    }
    if (rank == 0) starter = static_cast<ptrdiff_t>(kept);
    last_rank = rank;
    cps[kept] = cps[i];
    ranks[kept] = rank;
    ++kept;
  }
  for (size_t i = 0; i < kept; ++i) AppendUtf8(cps[i], out);
}

// Code points outside Interesting() are starters that neither decompose nor compose with
// what precedes them: NFC and NFD leave them, and the order around them, as they are.
std::string Normalize(std::string_view text, bool compose) {
  const InterestingSet& interesting = Interesting();
  std::string out;
  size_t copied = 0;         // text[0, copied) is in `out` (or normalized into it)
  size_t last_boundary = 0;  // start of the last code point NFC cannot change
  bool have_boundary = false;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    if (!interesting.Contains(NextCodePoint(text, &i), compose)) {
      last_boundary = start;
      have_boundary = true;
      continue;
    }
    const size_t span_begin = have_boundary && last_boundary >= copied ? last_boundary : start;
    size_t span_end = i;
    while (span_end < text.size()) {
      size_t next = span_end;
      if (!interesting.Contains(NextCodePoint(text, &next), compose)) break;
      span_end = next;
    }
    if (out.empty()) out.reserve(text.size() + 16);
    out.append(text.substr(copied, span_begin - copied));
    NormalizeSpan(text.substr(span_begin, span_end - span_begin), compose, &out);
    copied = span_end;
    i = span_end;
    have_boundary = false;
  }
  if (copied == 0) return std::string(text);
  out.append(text.substr(copied));
  return out;
}

}  // namespace

std::string ToNfc(std::string_view text) { return Normalize(text, /*compose=*/true); }

std::string ToNfd(std::string_view text) { return Normalize(text, /*compose=*/false); }

}  // namespace lockstep::tok
