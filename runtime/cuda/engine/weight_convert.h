// The host side of the device weights: each weight of the plan (runtime/engine/
// weight_plan.h) is read once as f32, converted to the device element type (bf16,
// rounded to nearest even, or f32 as is) and copied to the device. Plain C++ (no CUDA).
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_WEIGHT_CONVERT_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_WEIGHT_CONVERT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::cuda {

// "bf16" (element_bytes 2) or "f32" (4).
const char* ElementName(int element_bytes);

// The device bytes of `weight` in elements of `element_bytes`.
size_t WeightBytes(const engine::WeightSource& weight, int element_bytes);

// The bytes of every weight of `plan` (what this rank uploads: its experts only).
size_t PlanBytes(const engine::ModelPlan& plan, int element_bytes);

// "model.layers.3.qkv [384, 128] bf16, 98304 bytes": a weight in errors.
std::string DescribeWeight(const engine::WeightSource& weight, int element_bytes);

// `values` in elements of `element_bytes` (2: bf16 nearest-even, 4: f32 bits).
std::vector<std::byte> ToElements(absl::Span<const float> values, int element_bytes);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_WEIGHT_CONVERT_H_
