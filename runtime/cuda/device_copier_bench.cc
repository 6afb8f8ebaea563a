// Throughput of DeviceBlockCopier against a plain cudaMemcpy of the same bytes (the
// baseline: one contiguous copy between the device and pinned host memory), in one run.
// A GPU check (prints figures, asserts nothing about speed); exit status 1 only when a
// copy fails or there is no GPU.
//
//   device_copier_bench            whole 64 KiB blocks and 256-byte rows, 1 GiB pool
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/ids.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"
#include "runtime/cuda/device_block_allocator.h"

namespace lockstep::cuda {
namespace {

// bf16, head_dim 128, 16 tokens, 4 layers, 2 KV heads: 64 KiB blocks.
constexpr kv::BlockLayout kLayout{.num_layers = 4,
                                  .num_kv_heads = 2,
                                  .head_dim = 128,
                                  .tokens_per_block = 16,
                                  .element_bytes = 2};
constexpr int32_t kNumBlocks = 16384;  // 1 GiB
constexpr int kRepeats = 5;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Best-of-kRepeats GB/s of `copy`, which moves `bytes`.
template <typename Fn>
double BestGbPerS(size_t bytes, Fn copy) {
  double best = 0;
  for (int i = 0; i < kRepeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!copy()) return -1;
    const double gbps = bytes / Seconds(std::chrono::steady_clock::now() - start) / 1e9;
    if (gbps > best) best = gbps;
  }
  return best;
}

int Run() {
  DeviceBlockAllocator allocator(0);
  const size_t pool_bytes = kNumBlocks * kLayout.BlockBytes();
  absl::StatusOr<std::byte*> slab = allocator.Allocate(pool_bytes);
  if (!slab.ok()) {
    std::printf("no pool: %s\n", slab.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<kv::BlockCopier>> copier =
      allocator.MakeCopier(*slab, kLayout, kNumBlocks);
  if (!copier.ok()) {
    std::printf("no copier: %s\n", copier.status().ToString().c_str());
    return 1;
  }
  void* pinned = nullptr;
  if (cudaMallocHost(&pinned, pool_bytes) != cudaSuccess) {
    std::printf("no pinned buffer of %zu bytes\n", pool_bytes);
    return 1;
  }
  std::vector<std::byte> host(pool_bytes);
  bool ok = true;
  auto check = [&](const absl::Status& s) {
    if (!s.ok()) std::printf("copy failed: %s\n", s.ToString().c_str());
    ok = ok && s.ok();
    return s.ok();
  };

  const double d2h = BestGbPerS(pool_bytes, [&] {
    return cudaMemcpy(pinned, *slab, pool_bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  });
  const double h2d = BestGbPerS(pool_bytes, [&] {
    return cudaMemcpy(*slab, pinned, pool_bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  });
  std::printf("baseline cudaMemcpy pinned, %zu MiB: D2H %.1f GB/s, H2D %.1f GB/s\n",
              pool_bytes >> 20, d2h, h2d);

  // Whole blocks, every other block (a gather, not one contiguous range).
  std::vector<kv::BlockSpan> blocks;
  for (int32_t b = 0; b < kNumBlocks; b += 2)
    blocks.push_back({BlockId(b), 0, kLayout.BlockBytes()});
  // One 256-byte row (one token of one head) per block: the smallest useful range.
  std::vector<kv::BlockSpan> rows;
  for (int32_t b = 0; b < kNumBlocks; ++b) rows.push_back({BlockId(b), 512, 256});

  for (const auto& [label, list] :
       {std::pair{"whole blocks", &blocks}, std::pair{"256 B rows", &rows}}) {
    const std::vector<kv::BlockSpan>* spans = list;  // lambdas cannot capture a binding
    size_t bytes = 0;
    for (const kv::BlockSpan& s : *spans) bytes += s.length;
    const absl::Span<std::byte> out(host.data(), bytes);
    const double copy_out =
        BestGbPerS(bytes, [&] { return check((*copier)->CopyOut(*spans, out)); });
    const double copy_in = BestGbPerS(bytes, [&] { return check((*copier)->CopyIn(out, *spans)); });
    std::printf(
        "copier, %s (%zu spans, %zu MiB): CopyOut %.1f GB/s (%.2fx baseline D2H), "
        "CopyIn %.1f GB/s (%.2fx baseline H2D)\n",
        label, spans->size(), bytes >> 20, copy_out, copy_out / d2h, copy_in, copy_in / h2d);
  }
  cudaFreeHost(pinned);
  (*copier).reset();
  allocator.Free(*slab, pool_bytes);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace lockstep::cuda

int main() { return lockstep::cuda::Run(); }
