// Lockstep's NFC (nfc.h) against ICU's (libicu-dev), and ICU's NFKC, on two 10 MB
// corpora of generated lines (seed 7): "composed" text NFC leaves unchanged (English-like
// prose, code, CJK, emoji, precomposed accents) and "decomposed" text it changes
// (combining marks and conjoining Hangul jamo mixed in). Results in docs/perf.md.
//
//   bazel run --config=opt //tokenizer:normalization_bench
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "benchmark/benchmark.h"
#include "tokenizer/nfc.h"
#include "tokenizer/unicode_normalization.h"

namespace lockstep::tok {
namespace {

constexpr size_t kCorpusBytes = 10'000'000;

const std::vector<std::string>& Lines(bool decomposed) {
  static const auto* const corpora = [] {
    const char* const composed[] = {"the quick brown fox ",
                                    "jumps over the lazy dog. ",
                                    "int main() { return 0; } ",
                                    "\u4E2D\u6587 \u304B\u306A \uD55C\uAD6D\uC5B4 ",
                                    "caf\u00E9 na\u00EFve r\u00E9sum\u00E9 ",
                                    "\U0001F600\U0001F44D\U0001F3FD "};
    const char* const changed[] = {"e\u0301 o\u0308 a\u030A ", "s\u0307\u0323 ",
                                   "\u1100\u1161\u11A8 \u1112\u1161\u11AB "};
    auto* out = new std::vector<std::string>[2];
    for (int c = 0; c < 2; ++c) {
      std::mt19937 rng(7);
      size_t bytes = 0;
      std::string line;
      while (bytes < kCorpusBytes) {
        line += c == 1 && rng() % 3 == 0 ? changed[rng() % 3] : composed[rng() % 6];
        if (rng() % 12 == 0) {
          bytes += line.size();
          out[c].push_back(std::move(line));
          line.clear();
        }
      }
    }
    return out;
  }();
  return corpora[decomposed ? 1 : 0];
}

template <typename Normalize>
void Run(benchmark::State& state, Normalize normalize) {
  const std::vector<std::string>& lines = Lines(state.range(0) != 0);
  size_t bytes = 0;
  for (auto _ : state) {
    for (const std::string& line : lines) {
      std::string out = normalize(line);
      benchmark::DoNotOptimize(out);
      bytes += line.size();
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetLabel(state.range(0) != 0 ? "decomposed" : "composed");
}

void BM_NfcLockstep(benchmark::State& state) {
  Run(state, [](std::string_view s) { return ToNfc(s); });
}
void BM_NfcIcu(benchmark::State& state) {
  Run(state, [](std::string_view s) { return IcuNormalForm(NormalForm::kNfc, s); });
}
void BM_NfkcIcu(benchmark::State& state) {
  Run(state, [](std::string_view s) { return IcuNormalForm(NormalForm::kNfkc, s); });
}

BENCHMARK(BM_NfcLockstep)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NfcIcu)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NfkcIcu)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lockstep::tok

BENCHMARK_MAIN();
