#include "runtime/engine/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace lockstep::engine {
namespace {

constexpr double kPi = 3.14159265358979323846;

// The dimension (of `dim`) whose frequency turns `rotations` times over `max_position`.
double CorrectionDim(double rotations, int dim, double base, double max_position) {
  return dim * std::log(max_position / (rotations * 2.0 * kPi)) / (2.0 * std::log(base));
}

}  // namespace

std::vector<double> RopeInverseFrequencies(const ModelConfig& config) {
  const int dim = config.rope_dim();
  const int half = dim / 2;
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = 1.0 / std::pow(config.rope_theta, 2.0 * i / dim);
  if (!config.yarn) return inv_freq;
  const YarnScaling& y = config.yarn_scaling;
  const double original = static_cast<double>(y.original_max_position);
  double low = std::floor(CorrectionDim(y.beta_fast, dim, config.rope_theta, original));
  double high = std::ceil(CorrectionDim(y.beta_slow, dim, config.rope_theta, original));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // no division by zero in the ramp
  for (int i = 0; i < half; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double keep = 1.0 - ramp;  // 1: extrapolate (keep the frequency)
    inv_freq[i] = inv_freq[i] / y.factor * (1.0 - keep) + inv_freq[i] * keep;
  }
  return inv_freq;
}

float RopeMagnitude(const ModelConfig& config) {
  return config.yarn ? static_cast<float>(config.yarn_scaling.RopeMagnitude()) : 1.0f;
}

void ApplyRopeInterleaved(float* x, int count, int stride, int dim, const float* cos,
                          const float* sin) {
  for (int h = 0; h < count; ++h) {
    float* v = x + static_cast<int64_t>(h) * stride;
    for (int i = 0; i < dim / 2; ++i) {
      const float x1 = v[2 * i];
      const float x2 = v[2 * i + 1];
      v[2 * i] = x1 * cos[i] - x2 * sin[i];
      v[2 * i + 1] = x2 * cos[i] + x1 * sin[i];
    }
  }
}

}  // namespace lockstep::engine
