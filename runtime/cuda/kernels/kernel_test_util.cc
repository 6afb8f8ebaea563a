#include "runtime/cuda/kernels/kernel_test_util.h"

#include <cmath>
#include <limits>

namespace lockstep::cuda::kernels::testing {

namespace {

// std::generate_canonical<float, 24>(rng) for mt19937_64 as libstdc++ computes it: one
// draw x, float(x) / 2^64, at most the float just below 1. The library recomputes a
// long-double logarithm of the generator's range on every call, which was most of the
// attention tests' time; the value is the same.
float Canonical(std::mt19937_64& rng) {
  const float u = static_cast<float>(rng()) * 0x1p-64f;
  return u >= 1.0f ? std::nextafter(1.0f, 0.0f) : u;
}

}  // namespace

std::vector<float> RandomBf16Floats(std::mt19937_64& rng, size_t n, float stddev) {
  // std::normal_distribution<float>(0, stddev)'s draws in libstdc++ (the Marsaglia polar
  // method, a pair per accepted point, the second value returned next), written out with
  // the same float and double operations so that the values are the same bits for the
  // same generator (kernel_test_util_test compares them).
  const float mean = 0.0f;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; i += 2) {
    float x, y, r2;
    do {
      x = 2.0f * Canonical(rng) - 1.0;
      y = 2.0f * Canonical(rng) - 1.0;
      r2 = x * x + y * y;
    } while (r2 > 1.0 || r2 == 0.0);
    const float mult = std::sqrt(-2 * std::log(r2) / r2);
    out[i] = RoundToBf16(y * mult * stddev + mean);
    if (i + 1 < n) out[i + 1] = RoundToBf16(x * mult * stddev + mean);
  }
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
