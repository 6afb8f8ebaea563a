#include "runtime/engine/ops.h"

#include <immintrin.h>

#include <cmath>

namespace lockstep::engine {
namespace {

float DotPortable(const float* a, const float* b, int n) {
  float lane[8] = {};
  const int full = n / 8 * 8;
  for (int i = 0; i < full; i += 8) {
    for (int l = 0; l < 8; ++l) lane[l] = std::fma(a[i + l], b[i + l], lane[l]);
  }
  float tail = 0.0f;
  for (int i = full; i < n; ++i) tail = std::fma(a[i], b[i], tail);
  const float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5];
  const float s2 = lane[2] + lane[6], s3 = lane[3] + lane[7];
  return ((s0 + s2) + (s1 + s3)) + tail;
}

__attribute__((target("avx2,fma"))) float DotAvx2(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  const int full = n / 8 * 8;
  for (int i = 0; i < full; i += 8) {
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  }
  float tail = 0.0f;
  for (int i = full; i < n; ++i) tail = std::fma(a[i], b[i], tail);
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 u = _mm_add_ps(s, _mm_movehl_ps(s, s));  // [s0 + s2, s1 + s3]
  const __m128 r = _mm_add_ss(u, _mm_shuffle_ps(u, u, 1));
  return _mm_cvtss_f32(r) + tail;
}

void AxpyPortable(float alpha, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

__attribute__((target("avx2,fma"))) void AxpyAvx2(float alpha, const float* x, float* y, int n) {
  const __m256 a = _mm256_set1_ps(alpha);
  const int full = n / 8 * 8;
  for (int i = 0; i < full; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (int i = full; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

bool HasAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2;
}

}  // namespace

float Dot(const float* a, const float* b, int n) {
  return HasAvx2() ? DotAvx2(a, b, n) : DotPortable(a, b, n);
}

void Axpy(float alpha, const float* x, float* y, int n) {
  if (HasAvx2()) {
    AxpyAvx2(alpha, x, y, n);
  } else {
    AxpyPortable(alpha, x, y, n);
  }
}

void RmsNorm(const float* x, const float* weight, int n, float eps, float* out) {
  const float mean_square = Dot(x, x, n) / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(mean_square + eps);
  for (int i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void SiluMul(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void RopeAngles(int64_t position, const double* inv_freq, int half, float* cos, float* sin) {
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * inv_freq[i];
    cos[i] = static_cast<float>(std::cos(angle));
    sin[i] = static_cast<float>(std::sin(angle));
  }
}

void ApplyRope(float* x, int num_heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float x1 = v[i];
      const float x2 = v[i + half];
      v[i] = x1 * cos[i] - x2 * sin[i];
      v[i + half] = x2 * cos[i] + x1 * sin[i];
    }
  }
}

void Softmax(float* x, int n) {
  float max_value = x[0];
  for (int i = 1; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace lockstep::engine
