// `instances[i].cuda:` — the settings of the CUDA engine (`engine: cuda`), e.g.
//   engine: cuda
//   cuda: {dtype: bf16, kv_fraction: 0.9, graph_batch_sizes: [1, 2, 4, 8], batch_invariant: true,
//          graphs: true}
// Each rank of the instance runs on one GPU of its node: the device index is the rank's
// local rank (CudaDeviceIndex). A `cuda:` block with another engine is an error.
// Plain value types; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_CONFIG_CUDA_SETTINGS_H_
#define LOCKSTEP_RUNTIME_CONFIG_CUDA_SETTINGS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::config {

// The weights' and activations' type on the device. YAML: bf16 | f32.
enum class CudaDtype { kBf16, kF32 };

std::string_view CudaDtypeName(CudaDtype dtype);
absl::StatusOr<CudaDtype> ParseCudaDtype(std::string_view name);

struct CudaSettings {
  // bf16: weights converted once on the host and kept in bf16; f32: kept as loaded.
  CudaDtype dtype = CudaDtype::kBf16;
  // Share of the GPU's total memory the engine may hold in all (weights, KV pools,
  // workspaces, graphs); in (0, 1]. `kv.num_blocks: auto` sizes the target pool from
  // what is free within it.
  double kv_fraction = 0.9;
  // Row counts of the decode steps captured as CUDA graphs, each in
  // [1, max_batch_size * (1 + K)], no repeats (any order). Empty: the default buckets
  // (runtime/engine/graph_buckets.h). A step with more rows than the largest runs eagerly.
  std::vector<int64_t> graph_batch_sizes;
  // Kernels whose every row is bitwise the same whatever else shares the batch (as the
  // CPU engine's), at some speed cost.
  bool batch_invariant = false;
  // Capture and replay the decode graphs (false: every step runs eagerly).
  bool graphs = true;

  bool operator==(const CudaSettings& other) const = default;
};

// The problems of `cuda` (at `path`, e.g. "instances[0].cuda"), one "field: message"
// line each; `max_rows` is max_batch_size * (1 + K) of the instance. Empty when valid.
std::vector<std::string> CudaSettingsProblems(const CudaSettings& cuda, const std::string& path,
                                              int64_t max_rows);

// The GPU of rank `rank` of an instance whose node holds `ranks_per_node` of its ranks
// (world_size / nodes_per_instance): its local rank.
int64_t CudaDeviceIndex(int64_t rank, int64_t ranks_per_node);

}  // namespace lockstep::config

#endif  // LOCKSTEP_RUNTIME_CONFIG_CUDA_SETTINGS_H_
