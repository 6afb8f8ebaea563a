// Encode throughput of HfTokenizer against the JavaScript reference (same corpus, same
// run), and the cost of streaming decode per token, for the Llama 3 and Qwen 3 files.
//
//   tokenizer/testdata/setup_reference.sh
//   bazel run -c opt //tokenizer:hf_tokenizer_bench
//
// The corpus is 10 MB of generated lines (seed 7): English-like prose (60%, common words
// and made-up rare ones), code (20%), CJK (15%), emoji and numbers (5%). Both sides
// encode it line by line without special tokens; each reports bytes per second.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/testing_reference.h"

namespace lockstep::tok {
namespace {

constexpr size_t kCorpusBytes = 10'000'000;

const char* const kWords[] = {
    "the",   "of",         "and",   "to",         "a",     "in",      "is",      "it",
    "you",   "that",       "he",    "was",        "for",   "on",      "are",     "with",
    "as",    "I",          "his",   "they",       "be",    "at",      "one",     "have",
    "this",  "from",       "or",    "had",        "by",    "not",     "word",    "but",
    "what",  "some",       "we",    "can",        "out",   "other",   "were",    "all",
    "there", "when",       "up",    "use",        "your",  "how",     "said",    "an",
    "each",  "she",        "which", "do",         "their", "time",    "if",      "will",
    "way",   "about",      "many",  "then",       "them",  "write",   "would",   "like",
    "so",    "these",      "her",   "long",       "make",  "thing",   "see",     "him",
    "two",   "has",        "look",  "more",       "day",   "could",   "go",      "come",
    "did",   "number",     "sound", "no",         "most",  "people",  "my",      "over",
    "know",  "water",      "than",  "call",       "first", "who",     "may",     "down",
    "side",  "been",       "now",   "find",       "model", "serving", "request", "latency",
    "token", "Kubernetes", "GPU",   "throughput", "isn't", "they're", "we'll",   "It's",
    "Don't"};
const char* const kSyllables[] = {"ka",  "lo", "mi",   "ter", "qua", "ex",  "zor", "ph",  "ine",
                                  "ous", "ly", "tion", "pre", "un",  "str", "gh",  "ble", "ux"};
const char* const kCode[] = {"    for (int i = 0; i < n; ++i) {",
                             "        total += values[i] * weights[i];",
                             "    }",
                             "def forward(self, x):",
                             "    return self.norm(x + self.attn(x))",
                             "import numpy as np",
                             "if (status.ok()) return result;",
                             "  \"max_tokens\": 512, \"temperature\": 0.7,",
                             "SELECT name, count(*) FROM requests GROUP BY name;",
                             "#include <vector>",
                             "}",
                             ""};
const char* const kCjk[] = {"我们今天讨论模型推理的性能。", "分布式系统需要容错。",
                            "東京の天気は晴れです。",       "このモデルは日本語も話せます。",
                            "서버가 요청을 처리합니다。",   "数据并行与专家并行结合使用。"};
const char* const kOther[] = {"😀",     "🚀",      "👍🏽", "✅",        "3.14159", "2026-12-01",
                              "1,024", "$99.99", "#42",      "(see §3)", "—",       "…"};

std::string GenerateCorpus() {
  std::mt19937_64 rng(7);
  const auto pick = [&](const auto& items) {
    return items[std::uniform_int_distribution<size_t>(0, std::size(items) - 1)(rng)];
  };
  const auto chance = [&](int percent) {
    return std::uniform_int_distribution<int>(0, 99)(rng) < percent;
  };
  std::string text;
  while (text.size() < kCorpusBytes) {
    const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
    if (kind < 60) {
      const int words = std::uniform_int_distribution<int>(8, 60)(rng);
      for (int w = 0; w < words; ++w) {
        if (w > 0) text += ' ';
        if (chance(10)) {
          for (int s = std::uniform_int_distribution<int>(2, 4)(rng); s > 0; --s) {
            text += pick(kSyllables);
          }
        } else {
          text += pick(kWords);
        }
        if (chance(8)) text += chance(50) ? "," : ".";
      }
    } else if (kind < 80) {
      text += pick(kCode);
    } else if (kind < 95) {
      for (int s = std::uniform_int_distribution<int>(1, 4)(rng); s > 0; --s) text += pick(kCjk);
    } else {
      for (int s = std::uniform_int_distribution<int>(1, 6)(rng); s > 0; --s) {
        text += pick(kOther);
        text += ' ';
      }
    }
    text += '\n';
  }
  return text;
}

struct Fixture {
  testing::Reference reference;
  std::string corpus_path;
  std::vector<std::string> lines;
  size_t bytes = 0;
};

Fixture& GetFixture() {
  static Fixture* fixture = [] {
    auto* f = new Fixture;
    absl::StatusOr<testing::Reference> reference = testing::FindReference();
    if (!reference.ok()) {
      std::fprintf(stderr, "%s\n", std::string(reference.status().message()).c_str());
      std::exit(1);
    }
    f->reference = *reference;
    const std::string corpus = GenerateCorpus();
    f->corpus_path = (std::filesystem::temp_directory_path() / "hf_tokenizer_bench.txt").string();
    std::ofstream(f->corpus_path, std::ios::binary) << corpus;
    for (size_t start = 0; start < corpus.size();) {
      size_t end = corpus.find('\n', start);
      if (end == std::string::npos) end = corpus.size();
      f->lines.push_back(corpus.substr(start, end - start));
      start = end + 1;
    }
    f->bytes = corpus.size();
    return f;
  }();
  return *fixture;
}

std::unique_ptr<HfTokenizer> LoadTokenizer(const std::string& name) {
  auto tokenizer = HfTokenizer::LoadFromFile(GetFixture().reference.TokenizerJson(name));
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tokenizer.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(tokenizer);
}

const HfTokenizer& Tokenizer(const std::string& name) {
  static auto* tokenizers = new std::map<std::string, std::unique_ptr<HfTokenizer>>;
  auto& t = (*tokenizers)[name];
  if (t == nullptr) t = LoadTokenizer(name);
  return *t;
}

// The whole corpus per iteration; the word cache is warm after the first.
void BM_Encode(benchmark::State& state, const std::string& name) {
  const Fixture& f = GetFixture();
  const HfTokenizer& tokenizer = Tokenizer(name);
  size_t tokens = 0;
  for (auto _ : state) {
    for (const std::string& line : f.lines) tokens += tokenizer.Encode(line).size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(f.bytes * state.iterations()));
  state.counters["tokens"] = static_cast<double>(tokens / state.iterations());
}

// A freshly loaded tokenizer per iteration (loading not timed): one cold pass, as the
// reference makes.
void BM_EncodeColdCache(benchmark::State& state, const std::string& name) {
  const Fixture& f = GetFixture();
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<HfTokenizer> tokenizer = LoadTokenizer(name);
    state.ResumeTiming();
    for (const std::string& line : f.lines) benchmark::DoNotOptimize(tokenizer->Encode(line));
  }
  state.SetBytesProcessed(static_cast<int64_t>(f.bytes * state.iterations()));
}

// node js_reference.cjs bench: one pass of @huggingface/tokenizers over the same lines,
// timed inside node (loading excluded).
void BM_EncodeJsReference(benchmark::State& state, const std::string& name) {
  const Fixture& f = GetFixture();
  for (auto _ : state) {
    const absl::StatusOr<double> mb_per_s = f.reference.BenchEncode(name, f.corpus_path);
    if (!mb_per_s.ok()) {
      state.SkipWithError(std::string(mb_per_s.status().message()).c_str());
      return;
    }
    state.SetIterationTime(static_cast<double>(f.bytes) / 1e6 / *mb_per_s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(f.bytes * state.iterations()));
}

// DecodeStream::Push per token, over the ids of the first 1 MB of the corpus.
void BM_DecodeStreamPerToken(benchmark::State& state, const std::string& name) {
  const Fixture& f = GetFixture();
  const HfTokenizer& tokenizer = Tokenizer(name);
  std::vector<int32_t> ids;
  size_t bytes = 0;
  for (const std::string& line : f.lines) {
    if (bytes > 1'000'000) break;
    bytes += line.size() + 1;
    for (const int32_t id : tokenizer.Encode(line + "\n")) ids.push_back(id);
  }
  size_t out = 0;
  for (auto _ : state) {
    DecodeStream stream = tokenizer.NewDecodeStream();
    for (const int32_t id : ids) out += stream.Push(id).size();
    out += stream.Flush().size();
  }
  benchmark::DoNotOptimize(out);
  state.SetItemsProcessed(static_cast<int64_t>(ids.size() * state.iterations()));
  state.counters["tokens"] = static_cast<double>(ids.size());
}

void Register() {
  for (const std::string name : {"llama3", "qwen3"}) {
    benchmark::RegisterBenchmark(("BM_Encode/" + name).c_str(), BM_Encode, name)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0);
    benchmark::RegisterBenchmark(("BM_EncodeColdCache/" + name).c_str(), BM_EncodeColdCache, name)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3);
    benchmark::RegisterBenchmark(("BM_EncodeJsReference/" + name).c_str(), BM_EncodeJsReference,
                                 name)
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime()
        ->Iterations(1);
    benchmark::RegisterBenchmark(("BM_DecodeStreamPerToken/" + name).c_str(),
                                 BM_DecodeStreamPerToken, name)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace lockstep::tok

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  lockstep::tok::Register();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
