#include "runtime/cuda/cpu/cublaslt_heuristic.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::cuda_cpu::cublaslt {
namespace {

// Output tiles over the whole batch.
int64_t Tiles(const Problem& p, int64_t tile_m, int64_t tile_n) {
  return ((p.m + tile_m - 1) / tile_m) * ((p.n + tile_n - 1) / tile_n) * p.batch;
}

}  // namespace

size_t WorkspaceBytes(const AlgoState& algo, const Problem& problem) {
  if (algo.splitk <= 1) return 0;
  return static_cast<size_t>(algo.splitk) * problem.m * problem.n * sizeof(float);
}

std::vector<Candidate> Heuristic(const Problem& problem, const PrefState& pref, int max_count) {
  std::vector<Candidate> out;
  const size_t in_bytes = ElementBytes(problem.in);
  const size_t out_bytes = ElementBytes(problem.out);
  const size_t element[4] = {in_bytes, in_bytes, out_bytes, out_bytes};
  for (int op = kA; op <= kD; ++op) {
    if (pref.min_alignment[op] < element[op]) return out;
  }
  AlgoState base;
  std::copy(std::begin(pref.min_alignment), std::end(pref.min_alignment),
            std::begin(base.required_alignment));
  const auto add = [&](AlgoState algo) {
    if (static_cast<int>(out.size()) >= max_count) return;
    const size_t workspace = WorkspaceBytes(algo, problem);
    if (workspace > pref.max_workspace) return;
    const int64_t tile_m =
        algo.tile == CUBLASLT_MATMUL_TILE_64x64 || algo.tile == CUBLASLT_MATMUL_TILE_64x128 ? 64
                                                                                            : 128;
    const int64_t tile_n =
        algo.tile == CUBLASLT_MATMUL_TILE_64x64 || algo.tile == CUBLASLT_MATMUL_TILE_128x64 ? 64
                                                                                            : 128;
    out.push_back({algo, workspace,
                   static_cast<float>(Tiles(problem, tile_m, tile_n) * algo.splitk) / kSmCount});
  };
  const int64_t tiles = Tiles(problem, 128, 128);
  if ((pref.reduction_mask & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) != 0) {
    int splits = 1;
    while (splits * 2 <= kMaxSplits && tiles * splits * 2 <= kSmCount &&
           problem.k / (splits * 2) >= 256) {
      splits *= 2;
    }
    for (; splits >= 2; splits /= 2) {
      AlgoState algo = base;
      algo.id = kSplitKAlgoId;
      algo.tile = CUBLASLT_MATMUL_TILE_128x128;
      algo.splitk = static_cast<uint32_t>(splits);
      algo.reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      add(algo);
    }
  }
  const bool small = tiles < kSmCount;
  const uint32_t small_first[] = {CUBLASLT_MATMUL_TILE_64x64, CUBLASLT_MATMUL_TILE_128x64,
                                  CUBLASLT_MATMUL_TILE_64x128, CUBLASLT_MATMUL_TILE_128x128};
  for (int i = 0; i < 4; ++i) {
    AlgoState algo = base;
    algo.id = kPlainAlgoId;
    algo.tile = small_first[small ? i : 3 - i];
    add(algo);
  }
  return out;
}

}  // namespace lockstep::cuda_cpu::cublaslt
