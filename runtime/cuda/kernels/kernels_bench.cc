// GPU figures of the kernels against their goals (a gpu_check binary, run by
// tools/gpu/device_check.sh; issue "CUDA kernels"), each printed with PASS or MISS:
//  * bf16 GEMM TFLOP/s for 1B- and 8B-shaped projections (m = 1, 64, 4096) with the
//    wrapper's default algorithm against the fastest of cuBLASLt's 8 heuristic
//    candidates in the same run (goal: default >= 0.9 x best); the batch-invariant
//    mode's fixed algorithm in the same table (a figure: it trades speed for bits that
//    do not depend on the batch). Inputs are random (zeros run faster than real data),
//    and each figure times 20 GEMMs replayed from one CUDA graph, so a small M is timed
//    on the GPU, not on the host's enqueueing;
//  * decode attention's achieved bandwidth (K/V bytes read per second) at batch 64 x 4k
//    context against the device's peak HBM bandwidth, memory clock x bus width x 2
//    (goal: >= 70%), with a device-to-device cudaMemcpy of the same run beside it;
//  * prefill attention TFLOP/s for one 4k-token prompt (a figure, no goal).
// Ends with "goals: N met, M missed" (device_check.sh shows it). Exits 1 only when a
// kernel fails to run; a missed goal is a figure to record, not a failure.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
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

// Device memory freed on scope exit (contents left as allocated unless filled).
struct Buffer {
  explicit Buffer(size_t bytes) : bytes(bytes) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) ptr = nullptr;
  }
  // Random bf16 values in [-1, 1) from `seed`: a 4 MiB random tile copied over the
  // buffer (enough to keep the multipliers' bits toggling as real data does).
  bool FillRandomBf16(uint64_t seed) {
    if (ptr == nullptr) return false;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<Bf16> tile((size_t{4} << 20) / sizeof(Bf16));
    for (Bf16& b : tile) b = FloatToBf16(value(rng));
    const size_t tile_bytes = tile.size() * sizeof(Bf16);
    for (size_t offset = 0; offset < bytes; offset += tile_bytes) {
      if (cudaMemcpy(static_cast<char*>(ptr) + offset, tile.data(),
                     std::min(tile_bytes, bytes - offset), cudaMemcpyHostToDevice) != cudaSuccess) {
        return false;
      }
    }
    return true;
  }
  ~Buffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
  size_t bytes = 0;
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

// Goals met and missed, named.
struct Goals {
  int met = 0;
  std::vector<std::string> missed;
  const char* Check(bool ok, const std::string& what) {
    if (ok) {
      ++met;
    } else {
      missed.push_back(what);
    }
    return ok ? "PASS" : "MISS";
  }
};

// Mean milliseconds of `run` (which enqueues on `stream`) replayed kIterations times
// from one CUDA graph, after kWarmup eager runs (first-use work such as the GEMM
// wrapper's algorithm choice happens outside the capture); -1 on an error.
double GraphTimeMs(cudaStream_t stream, const std::function<bool()>& run) {
  for (int i = 0; i < kWarmup; ++i) {
    if (!run()) return -1;
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess) return -1;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1;
  bool ok = true;
  for (int i = 0; i < kIterations && ok; ++i) ok = run();
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  ok = ok && ended == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  cudaEvent_t start = nullptr, stop = nullptr;
  ok = ok && cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess;
  ok = ok && cudaGraphLaunch(exec, stream) == cudaSuccess;  // a warm replay
  ok = ok && cudaEventRecord(start, stream) == cudaSuccess &&
       cudaGraphLaunch(exec, stream) == cudaSuccess &&
       cudaEventRecord(stop, stream) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess;
  float ms = 0;
  if (ok) cudaEventElapsedTime(&ms, start, stop);
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  return ok ? ms / kIterations : -1;
}

// Mean milliseconds of one GEMM of `options` on `stream`; -1 when it cannot run.
double GemmMs(cudaStream_t stream, const GemmOptions& options, const Buffer& x, const Buffer& w,
              const Buffer& y, int64_t m, int64_t n, int64_t k) {
  absl::StatusOr<std::unique_ptr<CublasLtGemm>> gemm = CublasLtGemm::Create(stream, options);
  if (!gemm.ok()) return -1;
  return GraphTimeMs(stream, [&] {
    return (*gemm)->Gemm(x.as<Bf16>(), m, w.as<Bf16>(), n, k, y.as<Bf16>()).ok();
  });
}

bool BenchGemm(Goals& goals) {
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const Shape shapes[] = {{"1B qkv", 3072, 2048},      {"1B gate_up", 16384, 2048},
                          {"1B down", 2048, 8192},     {"8B qkv", 6144, 4096},
                          {"8B gate_up", 28672, 4096}, {"8B down", 4096, 14336}};
  bool ok = true;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return false;
  constexpr uint64_t kSeed = 20261205;
  std::printf(
      "GEMM inputs: random bf16 in [-1, 1) (seed %llu); each figure: %d GEMMs replayed "
      "from one CUDA graph\n",
      static_cast<unsigned long long>(kSeed), kIterations);
  std::printf("%-12s %5s %6s %6s  %9s %9s %6s %-5s  %9s %6s\n", "GEMM bf16", "m", "n", "k",
              "default", "best", "ratio", "goal", "invariant", "ratio");
  std::printf("%-12s %5s %6s %6s  %9s %9s %6s %-5s  %9s %6s\n", "(fp32 acc)", "", "", "", "TFLOP/s",
              "TFLOP/s", ">=0.9", "", "TFLOP/s", "");
  for (const Shape& s : shapes) {
    for (int64_t m : {1, 64, 4096}) {
      Buffer x(m * s.k * 2), w(s.n * s.k * 2), y(m * s.n * 2);
      if (!x.FillRandomBf16(kSeed + m) || !w.FillRandomBf16(kSeed + s.n * 131 + s.k)) {
        ok = false;
        std::printf("%-12s %5lld: could not fill the inputs\n", s.name, static_cast<long long>(m));
        continue;
      }
      double best_ms = -1;
      const double default_ms = GemmMs(stream, {}, x, w, y, m, s.n, s.k);
      for (int candidate = 0; candidate < 8; ++candidate) {
        const double ms =
            candidate == 0 ? default_ms
                           : GemmMs(stream, {.heuristic_index = candidate}, x, w, y, m, s.n, s.k);
        if (ms > 0 && (best_ms < 0 || ms < best_ms)) best_ms = ms;
      }
      const double invariant_ms = GemmMs(stream, {.batch_invariant = true}, x, w, y, m, s.n, s.k);
      if (default_ms < 0 || invariant_ms < 0) {
        ok = false;
        std::printf("%-12s %5lld: the wrapper's GEMM failed\n", s.name, static_cast<long long>(m));
        continue;
      }
      const double flops = 2.0 * m * s.n * s.k;
      const double ratio = best_ms / default_ms;
      const std::string what = std::string("GEMM ") + s.name + " m=" + std::to_string(m);
      std::printf("%-12s %5lld %6lld %6lld  %9.1f %9.1f %6.2f %-5s  %9.1f %6.2f\n", s.name,
                  static_cast<long long>(m), static_cast<long long>(s.n),
                  static_cast<long long>(s.k), flops / default_ms / 1e9, flops / best_ms / 1e9,
                  ratio, goals.Check(ratio >= 0.9, what), flops / invariant_ms / 1e9,
                  best_ms / invariant_ms);
    }
  }
  cudaStreamDestroy(stream);
  return ok;
}

// The device's peak memory bandwidth in bytes/s: memory clock (kHz) x bus width (bits)
// / 8 x 2 (double data rate); 0 when the driver does not say.
double PeakBandwidth(int* clock_khz, int* bus_bits) {
  int device = 0;
  *clock_khz = *bus_bits = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return 2.0 * *clock_khz * 1e3 * *bus_bits / 8.0;
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

bool BenchDecode(Goals& goals) {
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
  if (ms <= 0) {
    std::printf("decode attention: the kernel failed\n");
    return false;
  }
  // The K and V of one layer: batch x context x kv_heads x head_dim x 2 (K, V) x 2 bytes.
  const double bytes = 2.0 * batch * context * 8 * 128 * 2;
  const double achieved = bytes / ms * 1e3;  // bytes/s
  const size_t copy_bytes = size_t{1} << 30;
  Buffer a(copy_bytes), b(copy_bytes);
  const double copy_ms = TimeMs([&] {
    return cudaMemcpy(b.ptr, a.ptr, copy_bytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
  });
  const double copy = copy_ms > 0 ? 2.0 * copy_bytes / copy_ms * 1e3 : 0;  // read + write
  int clock_khz = 0, bus_bits = 0;
  const double peak = PeakBandwidth(&clock_khz, &bus_bits);
  std::printf(
      "device HBM peak: %.0f GB/s (memory clock %d MHz x %d-bit bus x 2)\n"
      "decode attention, batch %d x %d context, 32/8 heads of 128: %.3f ms, %.0f GB/s of K/V "
      "read\n"
      "  device-to-device memcpy in the same run: %.0f GB/s (read + write), %.2f of peak\n",
      peak / 1e9, clock_khz / 1000, bus_bits, batch, context, ms, achieved / 1e9, copy / 1e9,
      peak > 0 ? copy / peak : 0.0);
  if (peak <= 0) {
    std::printf("  %s: the driver reports no memory clock or bus width\n",
                goals.Check(false, "decode attention >= 70% of peak (no peak known)"));
    return true;
  }
  const double fraction = achieved / peak;
  std::printf("  achieved %.2f of peak (goal >= 0.70): %s\n", fraction,
              goals.Check(fraction >= 0.70, "decode attention >= 70% of peak"));
  return true;
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
  if (ms <= 0) {
    std::printf("prefill attention: the kernel failed\n");
    return false;
  }
  std::printf(
      "prefill attention, %d tokens, 32/8 heads of 128: %.3f ms, %.2f TFLOP/s (a figure, no "
      "goal)\n",
      tokens, ms, flops / ms / 1e9);
  return true;
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
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    std::printf("device 0: %s, %d SMs, compute capability %d.%d\n", prop.name,
                prop.multiProcessorCount, prop.major, prop.minor);
  }
  Goals goals;
  bool ok = BenchGemm(goals);
  ok = BenchDecode(goals) && ok;
  ok = BenchPrefill() && ok;
  std::printf("goals: %d met, %zu missed", goals.met, goals.missed.size());
  for (size_t i = 0; i < goals.missed.size(); ++i) {
    std::printf("%s%s", i == 0 ? " (" : "; ", goals.missed[i].c_str());
  }
  std::printf("%s\n", goals.missed.empty() ? "" : ")");
  std::printf(ok ? "kernels_bench: done\n" : "kernels_bench: a kernel failed\n");
  return ok ? 0 : 1;
}
