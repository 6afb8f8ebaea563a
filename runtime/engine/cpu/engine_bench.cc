// CPU engine benchmarks (docs/perf.md "## engine"):
//  * BM_Decode/<preset>/<batch>: one generation step for `batch` sequences at context
//    64 through CpuEngine Launch/Collect: decode tokens/s.
//  * BM_Prefill/<preset>: a 256-token context chunk: prefill tokens/s.
//  * BM_ForwardVsSgemm/<preset>/<rows>: the transformer forward of `rows` decode rows
//    (or one prefill chunk) against plain cblas_sgemm on the same layer GEMM shapes,
//    timed in the same run: engine GFLOP/s (GEMM flops / forward time), sgemm GFLOP/s,
//    and their ratio (1.0: the engine costs no more than its GEMMs through OpenBLAS);
//    gemm_share: the engine's own GEMM kernel on those shapes / the forward.
//    Both are timed in thread CPU time; OpenBLAS runs single-threaded, like the engine.
//  * BM_Gemm/<shape>/<rows> vs BM_Sgemm/<shape>/<rows>: the batch-invariant kernel
//    against cblas_sgemm on single layer shapes.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/check.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/gemm.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {
namespace {

const char* const kPresets[] = {"tiny", "tiny-moe"};

std::string ModelDir(const std::string& preset) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("lockstep_engine_bench_" + preset)).string();
  if (!std::filesystem::exists(dir + "/model.safetensors")) {
    MakeModelOptions options;
    options.preset = preset;
    options.out_dir = dir;
    options.with_draft = false;
    LOCKSTEP_CHECK_OK(MakeModel(options));
  }
  return dir;
}

// A KV slab and an engine over it; sequence i owns blocks [i * per_seq, (i+1) * per_seq).
struct BenchEngine {
  BenchEngine(const std::string& preset, int sequences, int tokens) {
    const std::string dir = ModelDir(preset);
    layout = *ModelBlockLayout(dir, kTokensPerBlock);
    per_seq = static_cast<int>(layout.BlocksFor(tokens));
    slab.assign(static_cast<size_t>(sequences) * per_seq * layout.BlockElements(), 0.0f);
    CpuEngineOptions options;
    options.model_dir = dir;
    options.target_storage = slab.data();
    options.target_layout = layout;
    options.target_num_blocks = sequences * per_seq;
    engine = std::move(CreateCpuEngine(options)).value();
  }
  kv::BlockRefs Kv(int i) const {
    kv::BlockRefs kv{RequestId(i), 1};
    for (int b = 0; b < per_seq; ++b) kv.blocks.push_back(BlockId(i * per_seq + b));
    return kv;
  }
  BatchResult Run(Batch batch) {
    const StepId step = batch.step;
    engine->Launch(std::move(batch));
    return std::move(engine->Collect(step, absl::Seconds(60))).value();
  }

  static constexpr int kTokensPerBlock = 16;
  kv::BlockLayout layout;
  int per_seq = 0;
  std::vector<float> slab;
  std::unique_ptr<ModelEngine> engine;
};

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = (i * 37 + salt * 11) % 256;
  return tokens;
}

void BM_Decode(benchmark::State& state, const char* preset) {
  const int batch_size = static_cast<int>(state.range(0));
  constexpr int kContext = 64;
  BenchEngine bench(preset, batch_size, kContext + 1);
  Batch prefill;
  for (int i = 0; i < batch_size; ++i) {
    ContextChunk& chunk = prefill.context.emplace_back();
    chunk.kv = bench.Kv(i);
    chunk.tokens = Prompt(kContext, i);
    chunk.last_chunk = true;
  }
  bench.Run(std::move(prefill));
  Batch step;
  for (int i = 0; i < batch_size; ++i) {
    GenerationStep& g = step.generation.emplace_back();
    g.kv = bench.Kv(i);
    g.seed = SequenceSeed{kContext, 65, {}};  // the same position every step
  }
  int64_t id = 1;
  for (auto _ : state) {
    step.step = StepId(id++);
    benchmark::DoNotOptimize(bench.Run(step));
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * batch_size, benchmark::Counter::kIsRate);
}

void BM_Prefill(benchmark::State& state, const char* preset) {
  constexpr int kChunk = 256;
  BenchEngine bench(preset, 1, kChunk);
  Batch batch;
  ContextChunk& chunk = batch.context.emplace_back();
  chunk.kv = bench.Kv(0);
  chunk.tokens = Prompt(kChunk, 3);
  chunk.last_chunk = true;
  int64_t id = 0;
  for (auto _ : state) {
    batch.step = StepId(id++);
    benchmark::DoNotOptimize(bench.Run(batch));
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kChunk, benchmark::Counter::kIsRate);
}

// One GEMM of a forward: rows x n x k.
struct Shape {
  int rows, n, k;
};

// The layer GEMMs of a forward over `rows` token rows with `logit_rows` logits (the
// rows * top_k expert rows split as evenly as possible over the experts).
std::vector<Shape> ForwardShapes(const ModelConfig& c, int rows, int logit_rows) {
  std::vector<Shape> shapes;
  for (int l = 0; l < c.num_layers; ++l) {
    shapes.push_back({rows, c.q_dim() + 2 * c.kv_dim(), c.hidden_size});
    shapes.push_back({rows, c.hidden_size, c.q_dim()});
    if (c.is_moe() && c.moe_layer[l]) {
      shapes.push_back({rows, c.num_experts, c.hidden_size});
      const int total = rows * c.num_experts_per_tok;
      for (int e = 0; e < c.num_experts; ++e) {
        const int expert_rows = total / c.num_experts + (e < total % c.num_experts ? 1 : 0);
        if (expert_rows == 0) continue;
        shapes.push_back({expert_rows, 2 * c.moe_intermediate_size, c.hidden_size});
        shapes.push_back({expert_rows, c.hidden_size, c.moe_intermediate_size});
      }
    } else {
      shapes.push_back({rows, 2 * c.intermediate_size, c.hidden_size});
      shapes.push_back({rows, c.hidden_size, c.intermediate_size});
    }
  }
  shapes.push_back({logit_rows, c.vocab_size, c.hidden_size});
  return shapes;
}

double Flops(const std::vector<Shape>& shapes) {
  double flops = 0;
  for (const Shape& s : shapes) flops += 2.0 * s.rows * s.n * s.k;
  return flops;
}

// CPU seconds of the calling thread: both sides of a ratio are timed this way, so
// load from other processes on the machine affects them less.
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Thread CPU seconds per pass of `gemm` (cblas_sgemm or the engine's kernel) over
// `shapes` (median of 7 repeats).
template <typename Fn>
double GemmSeconds(const std::vector<Shape>& shapes, Fn&& gemm) {
  std::vector<std::vector<float>> a, w, c;
  for (const Shape& s : shapes) {
    a.emplace_back(static_cast<size_t>(s.rows) * s.k, 0.5f);
    w.emplace_back(static_cast<size_t>(s.n) * s.k, 0.25f);
    c.emplace_back(static_cast<size_t>(s.rows) * s.n);
  }
  auto pass = [&] {
    for (size_t i = 0; i < shapes.size(); ++i)
      gemm(i, shapes[i], a[i].data(), w[i].data(), c[i].data());
  };
  pass();
  std::vector<double> times;
  for (int repeat = 0; repeat < 7; ++repeat) {
    const int iterations = 20;
    const double start = ThreadSeconds();
    for (int i = 0; i < iterations; ++i) pass();
    times.push_back((ThreadSeconds() - start) / iterations);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// rows > 0: that many decode rows (one per sequence, context 64); rows == 0: a
// 256-token prefill chunk.
void BM_ForwardVsSgemm(benchmark::State& state, const char* preset) {
  const bool prefill = state.range(0) == 0;
  const int sequences = prefill ? 1 : static_cast<int>(state.range(0));
  const int rows = prefill ? 256 : sequences;
  constexpr int kContext = 64;
  auto model = std::move(Transformer::Load(ModelDir(preset), "target", ExpertGroup{})).value();
  const kv::BlockLayout layout = model->Layout(16);
  const int per_seq = static_cast<int>(layout.BlocksFor(prefill ? rows : kContext + 1));
  std::vector<float> slab(static_cast<size_t>(sequences) * per_seq * layout.BlockElements(), 0.0f);
  const KvPoolView pool{slab.data(), layout, sequences * per_seq};
  std::vector<std::vector<BlockId>> tables(sequences);
  std::vector<SequenceKv> seqs;
  for (int s = 0; s < sequences; ++s) {
    for (int b = 0; b < per_seq; ++b) tables[s].push_back(BlockId(s * per_seq + b));
    seqs.push_back(SequenceKv{absl::MakeConstSpan(tables[s])});
  }
  std::vector<ForwardRow> rows_in;
  std::vector<int32_t> logit_rows;
  for (int i = 0; i < rows; ++i) {
    rows_in.push_back({(i * 31) % 256, prefill ? i : kContext, prefill ? 0 : i});
    if (!prefill) logit_rows.push_back(i);
  }
  if (prefill) logit_rows.push_back(rows - 1);
  Arena arena;
  const std::vector<Shape> shapes =
      ForwardShapes(model->config(), rows, static_cast<int>(logit_rows.size()));
  const double flops = Flops(shapes);
  const double sgemm_seconds =
      GemmSeconds(shapes, [](size_t, const Shape& s, const float* a, const float* w, float* c) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.rows, s.n, s.k, 1.0f, a, s.k, w, s.k,
                    0.0f, c, s.n);
      });
  std::vector<PackedMatrix> packed;
  for (const Shape& s : shapes) {
    packed.push_back(
        PackedMatrix::Pack(std::vector<float>(static_cast<size_t>(s.n) * s.k, 0.25f), s.n, s.k));
  }
  const double kernel_seconds =
      GemmSeconds(shapes, [&](size_t i, const Shape& s, const float* a, const float*, float* c) {
        Gemm(a, s.rows, s.k, packed[i], nullptr, c, s.n, nullptr);
      });
  const double start = ThreadSeconds();
  for (auto _ : state) {
    arena.Reset();
    benchmark::DoNotOptimize(model->Forward({rows_in, seqs, logit_rows}, pool, arena, nullptr));
  }
  const double engine_seconds = (ThreadSeconds() - start) / static_cast<double>(state.iterations());
  state.counters["engine_gflops"] = flops * 1e-9 / engine_seconds;
  state.counters["sgemm_gflops"] = flops * 1e-9 / sgemm_seconds;
  state.counters["ratio"] = sgemm_seconds / engine_seconds;
  // The share of the forward spent in its own GEMM kernel (the rest: attention, norms,
  // RoPE, activations, routing, bookkeeping).
  state.counters["gemm_share"] = kernel_seconds / engine_seconds;
  state.counters["tokens_per_s"] = rows / engine_seconds;
}

// Single-shape kernels: the engine's batch-invariant GEMM and cblas_sgemm.
void BM_Gemm(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  std::vector<float> x(static_cast<size_t>(rows) * k, 0.5f), w(static_cast<size_t>(n) * k, 0.25f),
      y(static_cast<size_t>(rows) * n);
  const PackedMatrix packed = PackedMatrix::Pack(w, n, k);
  for (auto _ : state) {
    Gemm(x.data(), rows, k, packed, nullptr, y.data(), n, nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["gflops"] =
      benchmark::Counter(2.0 * rows * n * k * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_Sgemm(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  std::vector<float> x(static_cast<size_t>(rows) * k, 0.5f), w(static_cast<size_t>(n) * k, 0.25f),
      y(static_cast<size_t>(rows) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f, x.data(), k, w.data(), k,
                0.0f, y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["gflops"] =
      benchmark::Counter(2.0 * rows * n * k * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void GemmArgs(benchmark::internal::Benchmark* b) {
  for (int rows : {1, 8, 32, 256}) {
    b->Args({rows, 256, 128});  // tiny: fused qkv
    b->Args({rows, 768, 128});  // tiny: fused gate/up
    b->Args({rows, 128, 384});  // tiny: down
  }
}

[[maybe_unused]] const bool kRegistered = [] {
  openblas_set_num_threads(1);  // the engine's GEMMs run on one thread here too
  for (const char* preset : kPresets) {
    benchmark::RegisterBenchmark((std::string("BM_Decode/") + preset).c_str(), BM_Decode, preset)
        ->Arg(1)
        ->Arg(8)
        ->Arg(32)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("BM_Prefill/") + preset).c_str(), BM_Prefill, preset)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("BM_ForwardVsSgemm/") + preset).c_str(),
                                 BM_ForwardVsSgemm, preset)
        ->Arg(1)
        ->Arg(8)
        ->Arg(32)
        ->Arg(0)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("BM_Gemm", BM_Gemm)->Apply(GemmArgs);
  benchmark::RegisterBenchmark("BM_Sgemm", BM_Sgemm)->Apply(GemmArgs);
  return true;
}();

}  // namespace
}  // namespace lockstep::engine
