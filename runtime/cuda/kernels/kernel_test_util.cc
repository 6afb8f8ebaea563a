#include "runtime/cuda/kernels/kernel_test_util.h"

#include <cmath>
#include <limits>

namespace lockstep::cuda::kernels::testing {

std::vector<float> RandomBf16Floats(std::mt19937_64& rng, size_t n, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> out(n);
  for (float& v : out) v = RoundToBf16(dist(rng));
  return out;
}

std::vector<Bf16> ToBf16(absl::Span<const float> values) {
  std::vector<Bf16> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = FloatToBf16(values[i]);
  return out;
}

std::vector<float> ToFloat(absl::Span<const Bf16> values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = Bf16ToFloat(values[i]);
  return out;
}

std::vector<float> RoundedToBf16(absl::Span<const float> values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = RoundToBf16(values[i]);
  return out;
}

bool HasNaN(absl::Span<const float> values) {
  for (float v : values) {
    if (std::isnan(v)) return true;
  }
  return false;
}

double RelativeL2(absl::Span<const float> out, absl::Span<const float> ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

}  // namespace lockstep::cuda::kernels::testing
