// Figures of the CUDA transformer on a GPU (a GPU check without a pass threshold): a
// model of a 1B model's width (hidden 2048, 16 heads over 8 KV heads of 128, SwiGLU
// 5632, vocabulary 32000) but 4 layers, random bf16 weights from make-model. Prints
// prefill tokens/s for forwards of 2048 tokens (4 prompts of 512), then decode steps
// of 1, 8 and 64 sequences at a 512-token context, eager and replayed from their CUDA
// graph: milliseconds per step (the forward with its input copy, logits copy and
// wait; no sampling) and tokens/s. Run: cuda_engine_bench [TMP_DIR].
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/cuda/engine/device_memory.h"
#include "runtime/engine/arena.h"
#include "runtime/engine/file_io.h"
#include "runtime/engine/graph_buckets.h"
#include "runtime/engine/make_model.h"
#include "runtime/engine/model_config.h"

namespace lockstep::cuda {
namespace {

constexpr int kSeqs = 64;
constexpr int kContext = 512;
constexpr int kTokensPerBlock = 16;
constexpr int kSteps = 20;

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
  c.num_layers = 4;
  c.num_heads = 16;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.rms_norm_eps = 1e-5;
  c.max_position = 4096;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

int Main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return Fail(absl::UnavailableError("no usable CUDA device"));
  }
  const char* tmp = argc > 1 ? argv[1] : std::getenv("TEST_TMPDIR");
  const std::string dir = engine::JoinPath(tmp != nullptr ? tmp : "/tmp", "bench_1b_width");
  const absl::Time made = absl::Now();
  if (absl::Status s = engine::WriteModel(BenchConfig(), dir, 1, engine::DType::kBF16); !s.ok()) {
    return Fail(s);
  }
  std::printf("model written in %.1f s\n", absl::ToDoubleSeconds(absl::Now() - made));
  CudaModelOptions o;
  o.max_rows = 2048 + kSeqs + 1;
  o.max_seqs = kSeqs + 1;
  o.max_decode_rows = kSeqs;
  o.tokens_per_block = kTokensPerBlock;
  absl::StatusOr<std::unique_ptr<CudaTransformer>> model = CudaTransformer::Load(dir, o);
  if (!model.ok()) return Fail(model.status());
  const kv::BlockLayout layout = (*model)->Layout(kTokensPerBlock);
  const int per_seq = (kContext + 2 * kSteps + kTokensPerBlock) / kTokensPerBlock;
  const int32_t blocks = kSeqs * per_seq;
  absl::StatusOr<DeviceBuffer> pool_memory =
      DeviceBuffer::Allocate(0, blocks * layout.BlockBytes(), "bench pool");
  if (!pool_memory.ok()) return Fail(pool_memory.status());
  cudaMemset(pool_memory->get(), 0, pool_memory->bytes());
  const engine::KvPoolView pool{pool_memory->as<float>(), layout, blocks};
  std::vector<std::vector<BlockId>> tables(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    for (int b = 0; b < per_seq; ++b) tables[s].push_back(BlockId(s * per_seq + b));
  }
  std::vector<engine::SequenceKv> seqs;
  for (const auto& t : tables) seqs.push_back(engine::SequenceKv{t});
  engine::Arena arena;

  // Prefill: forwards of 4 prompts of 512 tokens.
  absl::Duration prefill;
  for (int first = 0; first < kSeqs; first += 4) {
    std::vector<engine::ForwardRow> rows;
    std::vector<int32_t> logits;
    for (int s = 0; s < 4; ++s) {
      for (int p = 0; p < kContext; ++p) rows.push_back({(p * 31 + s) % 32000, p, s});
      logits.push_back(static_cast<int32_t>(rows.size()) - 1);
    }
    const absl::Span<const engine::SequenceKv> four = absl::MakeConstSpan(seqs).subspan(first, 4);
    const absl::Time start = absl::Now();
    absl::StatusOr<const float*> out =
        (*model)->Forward({rows, four, logits}, pool, arena, nullptr);
    if (!out.ok()) return Fail(out.status());
    if (first > 0) prefill += absl::Now() - start;  // the first one warms up
  }
  std::printf("prefill: %.0f tokens/s (forwards of %d tokens, %d forwards)\n",
              (kSeqs - 4) * kContext / absl::ToDoubleSeconds(prefill), 4 * kContext, kSeqs / 4 - 1);

  absl::StatusOr<engine::GraphBuckets> buckets = engine::GraphBuckets::Plan(kSeqs, 0, {1, 8, 64});
  if (!buckets.ok()) return Fail(buckets.status());
  if (absl::Status s = (*model)->CaptureGraphs(pool, *buckets); !s.ok()) return Fail(s);
  std::printf("%-6s %-6s %10s %12s\n", "batch", "mode", "ms/step", "tokens/s");
  for (const int batch : {1, 8, 64}) {
    for (const bool graph : {false, true}) {
      absl::Duration total;
      for (int step = 0; step < kSteps + 2; ++step) {
        std::vector<engine::ForwardRow> rows;
        std::vector<int32_t> logits;
        for (int s = 0; s < batch; ++s) {
          logits.push_back(s);
          rows.push_back({(step * 7 + s) % 32000, kContext + step, s});
        }
        const engine::StepAgreement agreement{batch, !graph, false};
        const absl::Time start = absl::Now();
        absl::StatusOr<const float*> out = (*model)->Forward(
            {rows, absl::MakeConstSpan(seqs).subspan(0, batch), logits, agreement}, pool, arena,
            nullptr);
        if (!out.ok()) return Fail(out.status());
        if (step >= 2) total += absl::Now() - start;
      }
      const double ms = absl::ToDoubleMilliseconds(total) / kSteps;
      std::printf("%-6d %-6s %10.3f %12.0f\n", batch, graph ? "graph" : "eager", ms,
                  batch * 1000.0 / ms);
    }
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::cuda

int main(int argc, char** argv) { return lockstep::cuda::Main(argc, argv); }
