#include "tokenizer/testing_ids.h"

#include <array>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok::testing {
namespace {

class Generator {
 public:
  Generator(uint64_t seed, const HfTokenizer& tokenizer) : rng_(seed), tokenizer_(tokenizer) {
    for (const AddedToken& t : tokenizer.added_vocabulary().tokens()) {
      (t.special ? special_ : added_).push_back(t.id);
    }
    for (int b = 0; b < 256; ++b) {
      std::optional<int32_t> id = tokenizer.TokenToId(absl::StrFormat("<0x%02X>", b));
      if (!id.has_value()) {  // byte-level BPE: the byte's one-character token
        std::string token;
        AppendUtf8(ByteLevelChar(static_cast<uint8_t>(b)), &token);
        id = tokenizer.TokenToId(token);
      }
      byte_[b] = id.value_or(-1);
    }
  }

  std::vector<int32_t> Next() {
    std::vector<int32_t> ids;
    for (int n = Uniform(1, 48); static_cast<int>(ids.size()) < n;) {
      const int kind = Uniform(0, 99);
      if (kind < 55) {
        ids.push_back(Ordinary());
      } else if (kind < 68) {
        Bytes({static_cast<uint8_t>(Uniform(0, 255))}, &ids);
      } else if (kind < 80) {
        Character(&ids);
      } else if (kind < 90 && !special_.empty()) {
        ids.push_back(Pick(special_));
      } else if (kind < 95 && !added_.empty()) {
        ids.push_back(Pick(added_));
      } else {
        ids.push_back(Ordinary());
      }
    }
    AvoidByteOrderMark(&ids);
    return ids;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int32_t Pick(const std::vector<int32_t>& ids) {
    return ids[static_cast<size_t>(Uniform(0, static_cast<int>(ids.size()) - 1))];
  }

  // Any id of the vocabulary that is not an added token.
  int32_t Ordinary() {
    for (;;) {
      const int32_t id = Uniform(0, tokenizer_.vocab_size() - 1);
      if (tokenizer_.IdToToken(id) != nullptr &&
          tokenizer_.added_vocabulary().FindById(id) == nullptr) {
        return id;
      }
    }
  }

  void Bytes(std::initializer_list<uint8_t> bytes, std::vector<int32_t>* ids) {
    for (const uint8_t b : bytes) {
      if (byte_[b] >= 0) ids->push_back(byte_[b]);
    }
  }

  // The byte tokens of a random 2- to 4-byte character, sometimes cut short or with a
  // special token inside.
  void Character(std::vector<int32_t>* ids) {
    char32_t cp;
    do {
      cp = static_cast<char32_t>(Uniform(0, 2) == 0 ? Uniform(0x80, 0x7FF)
                                 : Uniform(0, 1)    ? Uniform(0x800, 0xFFFF)
                                                    : Uniform(0x10000, 0x10FFFF));
    } while ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFEFF);
    std::string utf8;
    AppendUtf8(cp, &utf8);
    const size_t keep =
        Uniform(0, 3) == 0 ? static_cast<size_t>(Uniform(1, utf8.size())) : utf8.size();
    for (size_t i = 0; i < keep; ++i) {
      if (i > 0 && !special_.empty() && Uniform(0, 7) == 0) ids->push_back(Pick(special_));
      Bytes({static_cast<uint8_t>(utf8[i])}, ids);
    }
  }

  // Breaks every EF BB BF run of byte tokens (special tokens between them ignored).
  void AvoidByteOrderMark(std::vector<int32_t>* ids) {
    std::array<size_t, 3> run{};
    int have = 0;
    for (size_t i = 0; i < ids->size(); ++i) {
      const int32_t id = (*ids)[i];
      if (tokenizer_.IsSpecial(id)) continue;
      const int byte = ByteOf(id);
      static constexpr int kBom[] = {0xEF, 0xBB, 0xBF};
      if (byte == kBom[have]) {
        run[have++] = i;
        if (have == 3) {
          (*ids)[run[1]] = byte_['a'] >= 0 ? byte_['a'] : Ordinary();
          have = 0;
        }
      } else {
        have = byte == 0xEF ? (run[0] = i, 1) : 0;
      }
    }
  }

  int ByteOf(int32_t id) const {
    for (int b = 0; b < 256; ++b) {
      if (byte_[b] == id) return b;
    }
    return -1;
  }

  std::mt19937_64 rng_;
  const HfTokenizer& tokenizer_;
  std::vector<int32_t> special_, added_;
  std::array<int32_t, 256> byte_{};
};

}  // namespace

std::vector<std::vector<int32_t>> GenerateIdSequences(uint64_t seed, const HfTokenizer& tokenizer,
                                                      size_t count) {
  Generator generator(seed, tokenizer);
  std::vector<std::vector<int32_t>> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) out.push_back(generator.Next());
  return out;
}

}  // namespace lockstep::tok::testing
