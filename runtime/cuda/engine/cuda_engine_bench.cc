// Figures of the CUDA transformer on a GPU (a GPU check without a pass threshold; issue
// "engine: cuda"): a 1B-shaped model (16 layers of hidden 2048, 16 heads over 8 KV
// heads of 128, SwiGLU 5632, vocabulary 32000: 0.9B parameters), random bf16 weights
// from make-model (deleted again once on the device). Prints:
//  * prefill tokens/s of a single 2048-token prompt (the median of 3 forwards);
//  * decode at batch 1, 8 and 64 at a 512-token context, eager and replayed from its
//    CUDA graph: milliseconds per step (the forward with its input copy, logits copy
//    and wait; no sampling) and tokens/s;
//  * the host overhead share: per batch, the device time of the step's GEMMs, attention
//    and other kernels, timed with CUDA events in an instrumented eager step whose
//    kernels are all queued before the first runs (ForwardTimer), against the step
//    times above: share = 1 - (GEMM + attention) / step.
// Run: cuda_engine_bench [TMP_DIR].
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/cuda/engine/device_kv_pool.h"
#include "runtime/cuda/engine/forward_pass.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/graph_buckets.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::cuda {
namespace {

constexpr int kSeqs = 64;
constexpr int kContext = 512;
constexpr int kPrefillTokens = 2048;
constexpr int kTokensPerBlock = 16;
constexpr int kSteps = 20;
constexpr int kBatches[] = {1, 8, 64};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "cuda_engine_bench: %s\n", status.ToString().c_str());
  return 1;
}

engine::ModelConfig BenchConfig() {
  engine::ModelConfig c;
  c.model_type = "llama";
  c.vocab_size = 32000;
  c.hidden_size = 2048;
  c.intermediate_size = 5632;
  c.num_layers = 16;
  c.num_heads = 16;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.rms_norm_eps = 1e-5;
  c.max_position = 4096;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

// Device time per kernel group of one instrumented forward. Begin queues a host
// function that holds the stream until End (or 5 s, then `gate_timed_out`), so every
// kernel of the forward is queued before the first runs and the events measure kernel
// time, not launch gaps.
class EventTimer final : public ForwardTimer {
 public:
  struct Split {
    double gemm_ms = 0, attention_ms = 0, other_ms = 0;
    bool valid = false;
  };

  EventTimer() {
    events_.resize(4096);
    for (cudaEvent_t& e : events_) cudaEventCreate(&e);
  }
  ~EventTimer() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  void Begin(cudaStream_t stream) override {
    marks_.clear();
    released_.store(false);
    gate_timed_out_.store(false);
    gated_ = cudaLaunchHostFunc(stream, &EventTimer::Gate, this) == cudaSuccess;
    Record(Segment::kOther, stream);
  }
  void Mark(Segment segment, cudaStream_t stream) override { Record(segment, stream); }
  void End(cudaStream_t stream) override {
    Record(Segment::kOther, stream);
    released_.store(true);
  }

  // After the forward returned (its stream is done).
  Split Read() const {
    Split split;
    if (!gated_ || gate_timed_out_.load() || overflow_ || marks_.size() < 2) return split;
    for (size_t i = 0; i + 1 < marks_.size(); ++i) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, events_[i], events_[i + 1]) != cudaSuccess) return split;
      (marks_[i] == Segment::kGemm        ? split.gemm_ms
       : marks_[i] == Segment::kAttention ? split.attention_ms
                                          : split.other_ms) += ms;
    }
    split.valid = true;
    return split;
  }

 private:
  static void CUDART_CB Gate(void* self) {
    auto* timer = static_cast<EventTimer*>(self);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!timer->released_.load()) {
      if (std::chrono::steady_clock::now() > give_up) {
        timer->gate_timed_out_.store(true);
        return;
      }
      std::this_thread::yield();
    }
  }

  void Record(Segment segment, cudaStream_t stream) {
    if (marks_.size() == events_.size()) {
      overflow_ = true;
      return;
    }
    cudaEventRecord(events_[marks_.size()], stream);
    marks_.push_back(segment);
  }

  std::vector<cudaEvent_t> events_;
  std::vector<Segment> marks_;
  std::atomic<bool> released_{false};
  std::atomic<bool> gate_timed_out_{false};
  bool gated_ = false;
  bool overflow_ = false;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int Main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return Fail(absl::UnavailableError("no usable CUDA device"));
  }
  const char* tmp = argc > 1 ? argv[1] : std::getenv("TEST_TMPDIR");
  const std::string dir = engine::JoinPath(tmp != nullptr ? tmp : "/tmp", "bench_1b");
  const engine::ModelConfig config = BenchConfig();
  const absl::Time made = absl::Now();
  if (absl::Status s = engine::WriteModel(config, dir, 1, engine::DType::kBF16); !s.ok()) {
    return Fail(s);
  }
  std::printf("model: %d layers, hidden %d, written in %.1f s\n", config.num_layers,
              config.hidden_size, absl::ToDoubleSeconds(absl::Now() - made));
  CudaModelOptions o;
  o.max_rows = kPrefillTokens + kSeqs + 1;
  o.max_seqs = kSeqs + 1;
  o.max_decode_rows = kSeqs;
  o.tokens_per_block = kTokensPerBlock;
  const absl::Time loading = absl::Now();
  absl::StatusOr<std::unique_ptr<CudaTransformer>> model = CudaTransformer::Load(dir, o);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);  // 1.8 GB the run's output need not keep
  if (!model.ok()) return Fail(model.status());
  std::printf("loaded in %.1f s: %zu weight bytes, %zu scratch bytes\n",
              absl::ToDoubleSeconds(absl::Now() - loading), (*model)->weight_bytes(),
              (*model)->scratch_bytes());
  const kv::BlockLayout layout = (*model)->Layout(kTokensPerBlock);
  const int per_seq = (kContext + kSteps + 2 * kTokensPerBlock) / kTokensPerBlock;
  const int prefill_blocks = kPrefillTokens / kTokensPerBlock;
  absl::StatusOr<DeviceKvPool> pool = MakeDeviceKvPool(0, layout, kSeqs * per_seq + prefill_blocks);
  if (!pool.ok()) return Fail(pool.status());
  std::vector<std::vector<BlockId>> tables(kSeqs + 1);
  for (int s = 0; s < kSeqs; ++s) {
    for (int b = 0; b < per_seq; ++b) tables[s].push_back(BlockId(s * per_seq + b));
  }
  for (int b = 0; b < prefill_blocks; ++b) tables[kSeqs].push_back(BlockId(kSeqs * per_seq + b));
  std::vector<engine::SequenceKv> seqs;
  for (const auto& t : tables) seqs.push_back(engine::SequenceKv{t});
  engine::Arena arena;

  // The decode sequences' context: forwards of 4 prompts of 512 (also the warm-up).
  for (int first = 0; first < kSeqs; first += 4) {
    std::vector<engine::ForwardRow> rows;
    std::vector<int32_t> logits;
    for (int s = 0; s < 4; ++s) {
      for (int p = 0; p < kContext; ++p) rows.push_back({(p * 31 + s) % 32000, p, s});
      logits.push_back(static_cast<int32_t>(rows.size()) - 1);
    }
    absl::StatusOr<const float*> out = (*model)->Forward(
        {rows, absl::MakeConstSpan(seqs).subspan(first, 4), logits}, pool->view, arena, nullptr);
    if (!out.ok()) return Fail(out.status());
  }
  // Prefill: one prompt of 2048 tokens.
  {
    std::vector<engine::ForwardRow> rows;
    for (int p = 0; p < kPrefillTokens; ++p) rows.push_back({(p * 17 + 3) % 32000, p, 0});
    const std::vector<int32_t> last = {kPrefillTokens - 1};
    std::vector<double> seconds;
    for (int run = 0; run < 3; ++run) {
      const absl::Time start = absl::Now();
      absl::StatusOr<const float*> out = (*model)->Forward(
          {rows, absl::MakeConstSpan(seqs).subspan(kSeqs, 1), last}, pool->view, arena, nullptr);
      if (!out.ok()) return Fail(out.status());
      seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    }
    std::printf("prefill: one %d-token prompt in %.2f ms (median of 3): %.0f tokens/s\n",
                kPrefillTokens, Median(seconds) * 1e3, kPrefillTokens / Median(seconds));
  }

  absl::StatusOr<engine::GraphBuckets> buckets = engine::GraphBuckets::Plan(kSeqs, 0, {1, 8, 64});
  if (!buckets.ok()) return Fail(buckets.status());
  if (absl::Status s = (*model)->CaptureGraphs(pool->view, *buckets); !s.ok()) return Fail(s);
  // One decode step of `batch` sequences at position kContext + step.
  auto decode = [&](int batch, int step, bool graph) -> absl::StatusOr<double> {
    std::vector<engine::ForwardRow> rows;
    std::vector<int32_t> logits;
    for (int s = 0; s < batch; ++s) {
      logits.push_back(s);
      rows.push_back({(step * 7 + s) % 32000, kContext + step, s});
    }
    const engine::StepAgreement agreement{batch, !graph, false};
    const int64_t replays = (*model)->graph_replays();
    const absl::Time start = absl::Now();
    absl::StatusOr<const float*> out =
        (*model)->Forward({rows, absl::MakeConstSpan(seqs).subspan(0, batch), logits, agreement},
                          pool->view, arena, nullptr);
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!out.ok()) return out.status();
    if (graph != ((*model)->graph_replays() > replays)) {
      return absl::InternalError(absl::StrCat("batch ", batch, ": the step ",
                                              graph ? "did not replay" : "replayed", " a graph"));
    }
    return ms;
  };
  std::printf("%-6s %-6s %10s %12s\n", "batch", "mode", "ms/step", "tokens/s");
  double step_ms[3][2] = {};
  for (int b = 0; b < 3; ++b) {
    const int batch = kBatches[b];
    for (const bool graph : {false, true}) {
      double total = 0;
      for (int step = 0; step < kSteps + 2; ++step) {
        absl::StatusOr<double> ms = decode(batch, step, graph);
        if (!ms.ok()) return Fail(ms.status());
        if (step >= 2) total += *ms;
      }
      step_ms[b][graph] = total / kSteps;
      std::printf("%-6d %-6s %10.3f %12.0f\n", batch, graph ? "graph" : "eager", step_ms[b][graph],
                  batch * 1000.0 / step_ms[b][graph]);
    }
  }

  // Kernel time of one decode step (the median of 3 instrumented eager steps).
  EventTimer timer;
  std::printf(
      "\nhost overhead: device time of one eager decode step's kernels against the "
      "step times above\n");
  std::printf("%-6s %9s %9s %9s %9s   %-24s %-24s\n", "batch", "GEMM ms", "attn ms", "other ms",
              "all ms", "share outside GEMM+attn", "");
  std::printf("%-6s %9s %9s %9s %9s   %-24s %-24s\n", "", "", "", "", "", "of the eager step",
              "of the graph step");
  for (int b = 0; b < 3; ++b) {
    const int batch = kBatches[b];
    std::vector<double> gemm, attention, other;
    for (int run = 0; run < 3; ++run) {
      (*model)->set_forward_timer(&timer);
      absl::StatusOr<double> ms = decode(batch, run, false);
      (*model)->set_forward_timer(nullptr);
      if (!ms.ok()) return Fail(ms.status());
      const EventTimer::Split split = timer.Read();
      if (!split.valid) {
        return Fail(
            absl::InternalError("the instrumented step's kernel times are not valid "
                                "(the gate timed out or the events overflowed)"));
      }
      gemm.push_back(split.gemm_ms);
      attention.push_back(split.attention_ms);
      other.push_back(split.other_ms);
    }
    const double g = Median(gemm), a = Median(attention), k = Median(other);
    std::printf("%-6d %9.3f %9.3f %9.3f %9.3f   %-24.2f %-24.2f\n", batch, g, a, k, g + a + k,
                1.0 - (g + a) / step_ms[b][0], 1.0 - (g + a) / step_ms[b][1]);
  }
  std::printf("cuda_engine_bench: done\n");
  return 0;
}

}  // namespace
}  // namespace lockstep::cuda

int main(int argc, char** argv) { return lockstep::cuda::Main(argc, argv); }
