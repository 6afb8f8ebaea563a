#include "runtime/config/cuda_settings.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lockstep::config {

std::string_view CudaDtypeName(CudaDtype dtype) {
  return dtype == CudaDtype::kF32 ? "f32" : "bf16";
}

absl::StatusOr<CudaDtype> ParseCudaDtype(std::string_view name) {
  if (name == "bf16") return CudaDtype::kBf16;
  if (name == "f32") return CudaDtype::kF32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", std::string(name), "' (bf16 or f32)"));
}

std::vector<std::string> CudaSettingsProblems(const CudaSettings& cuda, const std::string& path,
                                              int64_t max_rows) {
  std::vector<std::string> problems;
  if (!(cuda.kv_fraction > 0 && cuda.kv_fraction <= 1)) {
    problems.push_back(
        absl::StrCat(path, ".kv_fraction: must be > 0 and <= 1, got ", cuda.kv_fraction));
  }
  const std::string sizes = absl::StrCat(path, ".graph_batch_sizes");
  std::vector<int64_t> seen;
  for (size_t i = 0; i < cuda.graph_batch_sizes.size(); ++i) {
    const int64_t rows = cuda.graph_batch_sizes[i];
    if (rows < 1 || rows > max_rows) {
      problems.push_back(absl::StrCat(sizes, "[", i, "]: must be in [1, ", max_rows,
                                      "] (max_batch_size * (1 + K)), got ", rows));
    } else if (std::find(seen.begin(), seen.end(), rows) != seen.end()) {
      problems.push_back(absl::StrCat(sizes, "[", i, "]: ", rows, " is listed twice"));
    }
    seen.push_back(rows);
  }
  return problems;
}

int64_t CudaDeviceIndex(int64_t rank, int64_t ranks_per_node) {
  return ranks_per_node > 0 ? rank % ranks_per_node : rank;
}

}  // namespace lockstep::config
