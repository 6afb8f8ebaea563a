#include "tokenizer/testing_corpus.h"

#include <functional>
#include <random>
#include <string_view>

#include "tokenizer/unicode.h"

namespace lockstep::tok::testing {
namespace {

constexpr std::string_view kWords[] = {
    "the",      "of",          "and",
    "to",       "in",          "is",
    "you",      "that",        "it",
    "Hello",    "WORLD",       "tokenizer",
    "Lockstep", "running",     "über",
    "naïve",    "café",        "résumé",
    "don't",    "I'm",         "we'LL",
    "it'S",     "they've",     "You'RE",
    "O'Neil",   "rock'n'roll", "https://example.com/a?b=c&d=e",
    "foo_bar",  "CamelCase",   "snake_case_name",
    "x86_64",
};
constexpr std::string_view kCode[] = {
    "int main(int argc, char** argv) {\n  return 0;\n}\n",
    "def f(x):\n    if x > 0:\n        return x ** 2\n    return -x\n",
    "for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];",
    "const auto [it, ok] = map.try_emplace(key, std::move(value));",
    "<div class=\"row\">\n\t<span>{{ value }}</span>\n</div>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "x = [1, 2, 3]; y = {'a': 1, \"b\": 2}  # comment\r\n",
    "    \t// TODO(someone): fix this!!!\n",
    "$ ls -la | grep '^d' > /dev/null 2>&1 && echo ok",
    "fn main() { println!(\"{:?}\", vec![1u8; 4]); }",
};
constexpr std::string_view kEmoji[] = {
    "😀", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🇫🇷", "🏳️‍🌈", "❤️",
    "✨", "🤖",     "🦀",        "🧑🏿‍🚀",           "☕",  "1️⃣",        "🫠",
};
constexpr std::string_view kCjk[] = {
    "中文字符", "你好，世界！",       "机器学习模型", "東京都",     "ひらがな",
    "カタカナ", "日本語の文章です。", "한국어",       "안녕하세요", "漢字かな交じり文",
    "「引用」", "（括弧）",           "一二三四五",   "繁體中文",
};
constexpr std::string_view kSpaces[] = {
    " ",      "  ",     "    ",   "\t",     "\n",     "\r\n",   "\n\n",
    "\r",     "\v",     "\f",     "\u00A0", "\u3000", "\u2028", "\u2029",
    "\u0085", "\uFEFF", "\u200B", "\u2003", "\u1680", "\u202F", " \n ",
};
constexpr std::string_view kPunctuation[] = {
    ".", ",", "!", "?", "...", "—", "–", "-", "'", "\"", "“", "”", "«", "»",  "(", ")", "[",
    "]", "{", "}", "@", "#",   "$", "%", "^", "&", "*",  "+", "=", "|", "\\", "/", ":", ";",
    "<", ">", "~", "`", "·",   "…", "¿", "¡", "§", "©",  "®", "™", "°", "€",  "£",
};
// Marks of several combining classes, so normalization has to reorder and compose.
constexpr char32_t kMarks[] = {0x0300, 0x0301, 0x0302, 0x0303, 0x0308, 0x030A, 0x030C, 0x0323,
                               0x0327, 0x0328, 0x0331, 0x0345, 0x0334, 0x05B0, 0x0651, 0x093C,
                               0x0E38, 0x1DCE, 0x20D7, 0x302A, 0x3099, 0x309A, 0x1D165};
constexpr char32_t kBases[] = {'a',    'e',    'o',    'u',    'A',    'E',    'n',
                               'c',    's',    'z',    0x03B1, 0x0391, 0x0438, 0x05D0,
                               0x0928, 0x0E01, 0x304B, 0x30CF, 'i'};

class Generator {
 public:
  Generator(uint64_t seed, const std::vector<std::string>& special_tokens)
      : rng_(seed), specials_(special_tokens) {}

  std::string String() {
    std::string s;
    if (Uniform(0, 249) == 0) {  // a line of 10k+ characters, of one kind or mixed
      const int kind = Uniform(0, 12);
      while (CodePointCount(s) < 10000) kind == 12 ? Fragment(&s) : Fragment(kind, &s);
      return s;
    }
    const int kind = Uniform(0, 12);
    const int fragments = Uniform(1, 12);
    for (int i = 0; i < fragments; ++i) {
      (kind < 12 && Uniform(0, 2) > 0) ? Fragment(kind, &s) : Fragment(&s);
    }
    return s;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T, size_t N>
  const T& Pick(const T (&items)[N]) {
    return items[Uniform(0, static_cast<int>(N) - 1)];
  }

  void Fragment(std::string* s) { Fragment(Uniform(0, 11), s); }

  void Fragment(int kind, std::string* s) {
    switch (kind) {
      case 0:  // prose
        for (int i = Uniform(1, 8); i > 0; --i) {
          s->append(Pick(kWords));
          s->append(Uniform(0, 4) == 0 ? Pick(kPunctuation) : " ");
        }
        return;
      case 1:
        s->append(Pick(kCode));
        return;
      case 2:
        for (int i = Uniform(1, 4); i > 0; --i) s->append(Pick(kEmoji));
        return;
      case 3:
        s->append(Pick(kCjk));
        return;
      case 4:  // combining marks, in any order, on a base or alone
        if (Uniform(0, 5) > 0) AppendUtf8(Pick(kBases), s);
        for (int i = Uniform(1, 4); i > 0; --i) AppendUtf8(Pick(kMarks), s);
        if (Uniform(0, 3) == 0) s->append("\u1100\u1161\u11A8");  // Hangul jamo
        return;
      case 5:  // invalid bytes
        for (int i = Uniform(1, 4); i > 0; --i) {
          static constexpr std::string_view kBad[] = {
              "\xFF",         "\xC3",     "\xE4\xB8",         "\xF0\x9F\x98", "\x80",
              "\xED\xA0\x80", "\xC0\xAF", "\xF5\x80\x80\x80", "\xE0\x80\x80"};
          s->append(Pick(kBad));
          if (Uniform(0, 1)) s->append(Pick(kWords));
        }
        return;
      case 6:  // special tokens, whole, doubled, broken or glued to text
        if (specials_.empty()) return Fragment(0, s);
        for (int i = Uniform(1, 3); i > 0; --i) {
          const std::string& t = specials_[Uniform(0, static_cast<int>(specials_.size()) - 1)];
          const int how = Uniform(0, 5);
          if (how == 0)
            s->append(t.substr(0, t.size() / 2));
          else if (how == 1)
            s->append(" " + t + " ");
          else if (how == 2)
            s->append(t + t);
          else
            s->append(t);
          if (Uniform(0, 1)) s->append(Pick(kWords));
        }
        return;
      case 7:
        for (int i = Uniform(1, 6); i > 0; --i) s->append(Pick(kSpaces));
        return;
      case 8: {  // numbers
        static constexpr std::string_view kDigits[] = {"0",  "1", "7", "9", "٣", "१",
                                                       "５", "²", "½", "Ⅻ", "𝟘", "〇"};
        for (int i = Uniform(1, 14); i > 0; --i) s->append(Pick(kDigits));
        if (Uniform(0, 1)) s->append(Uniform(0, 1) ? "." : ",");
        return;
      }
      case 9: {  // contractions and apostrophes
        static constexpr std::string_view kBits[] = {"'s",  "'S",  "'t", "'re", "'RE", "'ve", "'m",
                                                     "'ll", "'LL", "'d", "'D",  "'x",  "''",  "’s"};
        s->append(Pick(kWords));
        s->append(Pick(kBits));
        return;
      }
      case 10:  // random code points from every plane
        for (int i = Uniform(1, 6); i > 0; --i) {
          char32_t cp;
          do {
            const int plane = Uniform(0, 9);
            cp = plane < 6   ? static_cast<char32_t>(Uniform(0x20, 0x2FFF))
                 : plane < 8 ? static_cast<char32_t>(Uniform(0x3000, 0xFFFF))
                             : static_cast<char32_t>(Uniform(0x10000, 0x10FFFF));
          } while ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x17F);
          AppendUtf8(cp, s);
        }
        return;
      default:  // punctuation runs and line ends
        for (int i = Uniform(1, 5); i > 0; --i) s->append(Pick(kPunctuation));
        if (Uniform(0, 1)) s->append(Uniform(0, 1) ? "\n" : "\r\n");
        return;
    }
  }

  std::mt19937_64 rng_;
  const std::vector<std::string>& specials_;
};

}  // namespace

std::vector<std::string> GenerateCorpus(uint64_t seed, size_t count,
                                        const std::vector<std::string>& special_tokens) {
  Generator generator(seed, special_tokens);
  std::vector<std::string> corpus;
  corpus.reserve(count);
  for (size_t i = 0; i < count; ++i) corpus.push_back(generator.String());
  return corpus;
}

}  // namespace lockstep::tok::testing
