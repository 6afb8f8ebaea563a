// GPU figures of the kernels, no pass threshold (a gpu_check binary, run by
// tools/gpu/device_check.sh): bf16 GEMM TFLOP/s for 1B- and 8B-shaped projections with
// the wrapper's default algorithm against the fastest of cuBLASLt's heuristic candidates
// in the same run; decode attention's achieved bandwidth at batch 64 x 4k context (K/V
// bytes read per second) against a device-to-device cudaMemcpy measured in the same run;
// prefill attention TFLOP/s for one 4k-token prompt. Exits 1 when a kernel fails.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/cublaslt_gemm.h"
#include "runtime/cuda/kernels/decode_attention_kernel.h"
#include "runtime/cuda/kernels/decode_split_plan.h"
#include "runtime/cuda/kernels/prefill_attention_kernel.h"
#include "runtime/cuda/kernels/prefill_tile_plan.h"

namespace lockstep::cuda::kernels {
namespace {

constexpr int kWarmup = 3;
constexpr int kIterations = 20;

// Device memory freed on scope exit (contents left as allocated: timing only).
struct Buffer {
  explicit Buffer(size_t bytes) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) ptr = nullptr;
  }
  ~Buffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
  void* ptr = nullptr;
};

template <typename T>
std::unique_ptr<Buffer> Upload(const std::vector<T>& host) {
  auto buffer = std::make_unique<Buffer>(host.size() * sizeof(T));
  if (buffer->ptr == nullptr || cudaMemcpy(buffer->ptr, host.data(), host.size() * sizeof(T),
                                           cudaMemcpyHostToDevice) != cudaSuccess) {
    return nullptr;
  }
  return buffer;
}

// Mean milliseconds of `run` (which enqueues on the default stream); -1 on an error.
double TimeMs(const std::function<bool()>& run) {
  for (int i = 0; i < kWarmup; ++i) {
    if (!run()) return -1;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  bool ok = true;
  for (int i = 0; i < kIterations && ok; ++i) ok = run();
  cudaEventRecord(stop);
  const bool synced = cudaEventSynchronize(stop) == cudaSuccess;
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ok && synced ? ms / kIterations : -1;
}

bool BenchGemm() {
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const Shape shapes[] = {{"1B qkv", 3072, 2048},      {"1B gate_up", 16384, 2048},
                          {"1B down", 2048, 8192},     {"8B qkv", 6144, 4096},
                          {"8B gate_up", 28672, 4096}, {"8B down", 4096, 14336}};
  bool ok = true;
  std::printf("%-24s %6s %6s %6s   %15s   %12s   %5s\n", "GEMM bf16 (fp32 compute)", "m", "n", "k",
              "default TFLOP/s", "best TFLOP/s", "ratio");
  for (const Shape& s : shapes) {
    for (int64_t m : {1, 64, 4096}) {
      Buffer x(m * s.k * 2), w(s.n * s.k * 2), y(m * s.n * 2);
      double best_ms = -1, default_ms = -1;
      for (int candidate = 0; candidate < 8; ++candidate) {
        absl::StatusOr<std::unique_ptr<CublasLtGemm>> gemm =
            CublasLtGemm::Create(nullptr, {.heuristic_index = candidate});
        if (!gemm.ok()) break;
        const double ms = TimeMs([&] {
          return (*gemm)->Gemm(x.as<Bf16>(), m, w.as<Bf16>(), s.n, s.k, y.as<Bf16>()).ok();
        });
        if (ms < 0) {
          if (candidate == 0) ok = false;
          continue;
        }
        if (candidate == 0) default_ms = ms;
        if (best_ms < 0 || ms < best_ms) best_ms = ms;
      }
      const double flops = 2.0 * m * s.n * s.k;
      std::printf("%-24s %6lld %6lld %6lld   %15.1f   %12.1f   %5.2f\n", s.name,
                  static_cast<long long>(m), static_cast<long long>(s.n),
                  static_cast<long long>(s.k), flops / default_ms / 1e9, flops / best_ms / 1e9,
                  best_ms / default_ms);
    }
  }
  return ok;
}

// A pool of `blocks` bf16 blocks of 2 layers x 8 KV heads x 16 tokens x 128 and
// `seqs` tables of `per_seq` consecutive blocks.
struct BenchPool {
  BenchPool(int seqs, int per_seq)
      : storage(static_cast<size_t>(seqs) * per_seq * 2 * 2 * 8 * 16 * 128 * 2) {
    std::vector<int32_t> table(static_cast<size_t>(seqs) * per_seq);
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    table_buffer = Upload(table);
    desc = {.storage = storage.ptr,
            .num_layers = 2,
            .num_kv_heads = 8,
            .head_dim = 128,
            .tokens_per_block = 16,
            .block_table = table_buffer ? table_buffer->as<int32_t>() : nullptr,
            .table_stride = per_seq};
  }
  bool ok() const { return storage.ptr != nullptr && table_buffer != nullptr; }
  Buffer storage;
  std::unique_ptr<Buffer> table_buffer;
  PagedKvDesc desc;
};

bool BenchDecode() {
  const int batch = 64, context = 4096, heads = 32;
  BenchPool pool(batch, context / 16);
  absl::StatusOr<DecodeSplitPlan> plan = PlanDecodeSplits(std::vector<int64_t>(batch, context),
                                                          [&] {
                                                            std::vector<int32_t> seqs(batch);
                                                            for (int i = 0; i < batch; ++i)
                                                              seqs[i] = i;
                                                            return seqs;
                                                          }(),
                                                          {});
  if (!pool.ok() || !plan.ok()) return false;
  std::unique_ptr<Buffer> rows = Upload(plan->rows), items = Upload(plan->items);
  Buffer q(batch * heads * 128 * 2), out(batch * heads * 128 * 2);
  Buffer scratch(DecodeScratchFloats(plan->total_splits(), heads, 128) * sizeof(float));
  const DecodeAttentionArgs args{.kv = pool.desc,
                                 .layer = 1,
                                 .q = q.as<Bf16>(),
                                 .q_row_stride = heads * 128,
                                 .num_heads = heads,
                                 .scale = 0.088f,
                                 .rows = rows->as<DecodeRowDesc>(),
                                 .items = items->as<DecodeWorkItem>(),
                                 .num_rows = batch,
                                 .num_items = plan->total_splits(),
                                 .scratch = scratch.as<float>(),
                                 .out = out.as<Bf16>(),
                                 .out_row_stride = heads * 128};
  const double ms = TimeMs([&] { return LaunchDecodeAttention(args, nullptr) == cudaSuccess; });
  // The K and V of one layer: batch x context x kv_heads x head_dim x 2 (K, V) x 2 bytes.
  const double bytes = 2.0 * batch * context * 8 * 128 * 2;
  const size_t copy_bytes = size_t{1} << 30;
  Buffer a(copy_bytes), b(copy_bytes);
  const double copy_ms = TimeMs([&] {
    return cudaMemcpy(b.ptr, a.ptr, copy_bytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
  });
  const double copy_gbs = 2.0 * copy_bytes / copy_ms / 1e6;  // read + write
  std::printf(
      "decode attention, batch %d x %d context, 32/8 heads of 128: %.3f ms, %.0f GB/s "
      "K/V read; device-to-device memcpy %.0f GB/s (read + write); ratio %.2f\n",
      batch, context, ms, bytes / ms / 1e6, copy_gbs, bytes / ms / 1e6 / copy_gbs);
  return ms > 0;
}

bool BenchPrefill() {
  const int tokens = 4096, heads = 32;
  BenchPool pool(1, tokens / 16);
  absl::StatusOr<std::vector<PrefillTileDesc>> tiles =
      PlanPrefillTiles(std::vector<PrefillChunk>{{.seq = 0, .row_begin = 0, .num_rows = tokens}},
                       kMaxPrefillTileRows);
  if (!pool.ok() || !tiles.ok()) return false;
  std::unique_ptr<Buffer> dtiles = Upload(*tiles);
  Buffer q(static_cast<size_t>(tokens) * heads * 128 * 2);
  Buffer out(static_cast<size_t>(tokens) * heads * 128 * 2);
  const PrefillAttentionArgs args{.kv = pool.desc,
                                  .layer = 1,
                                  .q = q.as<Bf16>(),
                                  .q_row_stride = heads * 128,
                                  .num_heads = heads,
                                  .scale = 0.088f,
                                  .tiles = dtiles->as<PrefillTileDesc>(),
                                  .num_tiles = static_cast<int>(tiles->size()),
                                  .out = out.as<Bf16>(),
                                  .out_row_stride = heads * 128};
  const double ms = TimeMs([&] { return LaunchPrefillAttention(args, nullptr) == cudaSuccess; });
  // Causal: QK^T and PV over about n^2 / 2 (query, key) pairs, 2 FLOPs per multiply-add.
  const double flops = 4.0 * heads * 128 * (static_cast<double>(tokens) * (tokens + 1) / 2);
  std::printf("prefill attention, %d tokens, 32/8 heads of 128: %.3f ms, %.2f TFLOP/s\n", tokens,
              ms, flops / ms / 1e9);
  return ms > 0;
}

}  // namespace
}  // namespace lockstep::cuda::kernels

int main() {
  using namespace lockstep::cuda::kernels;
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::printf("kernels_bench: no usable GPU\n");
    return 1;
  }
  bool ok = BenchGemm();
  ok = BenchDecode() && ok;
  ok = BenchPrefill() && ok;
  std::printf(ok ? "kernels_bench: done\n" : "kernels_bench: a kernel failed\n");
  return ok ? 0 : 1;
}
