#include "runtime/cuda/engine/weight_convert.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda {

const char* ElementName(int element_bytes) { return element_bytes == 4 ? "f32" : "bf16"; }

size_t WeightBytes(const engine::WeightSource& weight, int element_bytes) {
  return weight.elements() * static_cast<size_t>(element_bytes);
}

size_t PlanBytes(const engine::ModelPlan& plan, int element_bytes) {
  size_t total = 0;
  for (const engine::WeightSource* w : plan.All()) total += WeightBytes(*w, element_bytes);
  return total;
}

std::string DescribeWeight(const engine::WeightSource& weight, int element_bytes) {
  const std::string shape = weight.is_vector()
                                ? absl::StrCat("[", weight.rows, "]")
                                : absl::StrCat("[", weight.rows, ", ", weight.cols, "]");
  return absl::StrCat(weight.label, " ", shape, " ", ElementName(element_bytes), ", ",
                      WeightBytes(weight, element_bytes), " bytes");
}

std::vector<std::byte> ToElements(absl::Span<const float> values, int element_bytes) {
  std::vector<std::byte> out(values.size() * static_cast<size_t>(element_bytes));
  if (element_bytes == 4) {
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const kernels::Bf16 b = kernels::FloatToBf16(values[i]);
    std::memcpy(out.data() + 2 * i, &b.bits, 2);
  }
  return out;
}

}  // namespace lockstep::cuda
