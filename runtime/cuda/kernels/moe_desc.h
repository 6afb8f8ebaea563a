// Plain structs and sizes of the device-count MoE path shared by the host planners and
// the kernels (no absl, no CUDA types: .cu files include this header).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_DESC_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_DESC_H_

#include <cstdint>

namespace lockstep::cuda::kernels {

// The grouped (DeepSeek-V3) routing kernel's limits (grouped_route_kernel.h).
inline constexpr int kMaxGroupedExperts = 512;
inline constexpr int kMaxGroupedTopK = 16;
inline constexpr int kMaxExpertGroups = 64;

// The most rows of one grouped GEMM tile.
inline constexpr int kGroupedGemmTileRows = 32;

// One tile of the grouped GEMM (grouped_gemm_kernel.h): rows [row_begin, row_begin +
// rows) times weights[expert]; expert < 0: unused.
struct GroupedGemmTile {
  int32_t row_begin = 0;
  int32_t rows = 0;
  int32_t expert = -1;
};

// The most tiles `groups` x `local_experts` segments of `total_rows` rows in all can need.
inline int MaxGroupedGemmTiles(int64_t total_rows, int groups, int local_experts) {
  return static_cast<int>((total_rows + kGroupedGemmTileRows - 1) / kGroupedGemmTileRows) +
         groups * local_experts;
}

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_MOE_DESC_H_
