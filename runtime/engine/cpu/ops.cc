#include "runtime/engine/cpu/ops.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

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

#if defined(__x86_64__)
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
#endif  // __x86_64__

void AxpyPortable(float alpha, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void AxpyAvx2(float alpha, const float* x, float* y, int n) {
  const __m256 a = _mm256_set1_ps(alpha);
  const int full = n / 8 * 8;
  for (int i = 0; i < full; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (int i = full; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

// Reduces the lane accumulators of four keys with DotAvx2's tree: s_l = lane l +
// lane l + 4, then (s0 + s2) + (s1 + s3), plus the (empty) tail; times `scale`.
__attribute__((target("avx2,fma"))) inline __m128 ReduceFour(__m256 a0, __m256 a1, __m256 a2,
                                                             __m256 a3, __m128 scale) {
  __m128 s0 = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
  __m128 s1 = _mm_add_ps(_mm256_castps256_ps128(a1), _mm256_extractf128_ps(a1, 1));
  __m128 s2 = _mm_add_ps(_mm256_castps256_ps128(a2), _mm256_extractf128_ps(a2, 1));
  __m128 s3 = _mm_add_ps(_mm256_castps256_ps128(a3), _mm256_extractf128_ps(a3, 1));
  _MM_TRANSPOSE4_PS(s0, s1, s2, s3);  // s_l now holds lane l of the four keys
  const __m128 r = _mm_add_ps(_mm_add_ps(_mm_add_ps(s0, s2), _mm_add_ps(s1, s3)), _mm_setzero_ps());
  return _mm_mul_ps(r, scale);
}

// Eight keys at a time (eight independent FMA chains); per key the lanes and the
// reduction tree of DotAvx2 exactly.
__attribute__((target("avx2,fma"))) void DotManyAvx2(const float* q, const float* keys, int count,
                                                     int n, float scale, float* out) {
  const __m128 scale4 = _mm_set1_ps(scale);
  int t = 0;
  for (; t + 8 <= count; t += 8) {
    const float* k = keys + static_cast<size_t>(t) * n;
    __m256 a[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) a[j] = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) a[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + j * n + i), a[j]);
    }
    _mm_storeu_ps(out + t, ReduceFour(a[0], a[1], a[2], a[3], scale4));
    _mm_storeu_ps(out + t + 4, ReduceFour(a[4], a[5], a[6], a[7], scale4));
  }
  for (; t < count; ++t) out[t] = DotAvx2(q, keys + static_cast<size_t>(t) * n, n) * scale;
}

// `out` in registers, 64 floats at a time; per element the FMA chain of AxpyAvx2.
__attribute__((target("avx2,fma"))) void WeightedSumAvx2(const float* weights, const float* values,
                                                         int count, int n, float* out) {
  for (int c = 0; c < n; c += 64) {
    const int vectors = std::min(64, n - c) / 8;
    __m256 acc[8];
    for (int r = 0; r < vectors; ++r) acc[r] = _mm256_loadu_ps(out + c + 8 * r);
    for (int t = 0; t < count; ++t) {
      const __m256 w = _mm256_set1_ps(weights[t]);
      const float* v = values + static_cast<size_t>(t) * n + c;
      for (int r = 0; r < vectors; ++r)
        acc[r] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * r), acc[r]);
    }
    for (int r = 0; r < vectors; ++r) _mm256_storeu_ps(out + c + 8 * r, acc[r]);
  }
}

__attribute__((target("avx2,fma"))) void WeightedSumPairAvx2(const float* weights_a,
                                                             const float* weights_b,
                                                             const float* values, int count, int n,
                                                             float* out_a, float* out_b) {
  for (int c = 0; c < n; c += 32) {
    const int vectors = std::min(32, n - c) / 8;
    __m256 acc_a[4], acc_b[4];
    for (int r = 0; r < vectors; ++r) {
      acc_a[r] = _mm256_loadu_ps(out_a + c + 8 * r);
      acc_b[r] = _mm256_loadu_ps(out_b + c + 8 * r);
    }
    for (int t = 0; t < count; ++t) {
      const __m256 wa = _mm256_set1_ps(weights_a[t]);
      const __m256 wb = _mm256_set1_ps(weights_b[t]);
      const float* v = values + static_cast<size_t>(t) * n + c;
      for (int r = 0; r < vectors; ++r) {
        const __m256 x = _mm256_loadu_ps(v + 8 * r);
        acc_a[r] = _mm256_fmadd_ps(wa, x, acc_a[r]);
        acc_b[r] = _mm256_fmadd_ps(wb, x, acc_b[r]);
      }
    }
    for (int r = 0; r < vectors; ++r) {
      _mm256_storeu_ps(out_a + c + 8 * r, acc_a[r]);
      _mm256_storeu_ps(out_b + c + 8 * r, acc_b[r]);
    }
  }
}
#endif  // __x86_64__

// exp(x) in float (Cephes expf: range reduction by ln 2, degree-5 polynomial), clamped
// to [-88, 88]; 2^n is built from the exponent bits (n = -127 gives 0). The scalar and
// AVX2 versions perform the same operations, so they give the same bits.
constexpr float kExpLo = -88.0f, kExpHi = 88.0f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

float ExpScalar(float x) {
  x = std::min(std::max(x, kExpLo), kExpHi);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kP0;
  for (float c : {kP1, kP2, kP3, kP4, kP5}) p = std::fma(p, r, c);
  const float y = std::fma(p, r * r, r) + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return y * scale;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline __m256 ExpAvx2(__m256 x) {
  // x second: MAXPS and MINPS return their second operand when one is NaN, so a NaN
  // stays NaN (as in ExpScalar) instead of becoming exp(kExpLo).
  x = _mm256_min_ps(_mm256_set1_ps(kExpHi), _mm256_max_ps(_mm256_set1_ps(kExpLo), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}
#endif  // __x86_64__

float SiluScalar(float g, float u) { return g / (1.0f + ExpScalar(-g)) * u; }

void SiluMulPortable(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = SiluScalar(gate[i], up[i]);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void SiluMulAvx2(const float* gate, const float* up, int n,
                                                     float* out) {
  const int full = n / 8 * 8;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 minus = _mm256_set1_ps(-0.0f);
  for (int i = 0; i < full; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = ExpAvx2(_mm256_xor_ps(g, minus));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (int i = full; i < n; ++i) out[i] = SiluScalar(gate[i], up[i]);
}
#endif  // __x86_64__

// Softmax: the exponentials summed in eight lanes (element i in lane i % 8, the tail
// sequentially), lanes reduced by DotAvx2's tree.
void SoftmaxPortable(float* x, int n) {
  float max_value = x[0];
  for (int i = 1; i < n; ++i) max_value = x[i] > max_value ? x[i] : max_value;
  float lane[8] = {};
  const int full = n / 8 * 8;
  for (int i = 0; i < full; ++i) lane[i % 8] += (x[i] = ExpScalar(x[i] - max_value));
  float tail = 0.0f;
  for (int i = full; i < n; ++i) tail += (x[i] = ExpScalar(x[i] - max_value));
  const float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5];
  const float s2 = lane[2] + lane[6], s3 = lane[3] + lane[7];
  const float inv = 1.0f / (((s0 + s2) + (s1 + s3)) + tail);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void SoftmaxAvx2(float* x, int n) {
  float max_value = x[0];
  for (int i = 1; i < n; ++i) max_value = x[i] > max_value ? x[i] : max_value;
  const __m256 max8 = _mm256_set1_ps(max_value);
  __m256 acc = _mm256_setzero_ps();
  const int full = n / 8 * 8;
  for (int i = 0; i < full; i += 8) {
    const __m256 e = ExpAvx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), max8));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float tail = 0.0f;
  for (int i = full; i < n; ++i) tail += (x[i] = ExpScalar(x[i] - max_value));
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 u = _mm_add_ps(s, _mm_movehl_ps(s, s));
  const float inv = 1.0f / (_mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1))) + tail);
  const __m256 inv8 = _mm256_set1_ps(inv);
  for (int i = 0; i < full; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv8));
  for (int i = full; i < n; ++i) x[i] *= inv;
}

bool HasAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2;
}
#endif  // __x86_64__

}  // namespace

// The AVX2 kernels where the CPU has them (x86); the portable loops, which give the
// same bits, otherwise and on other architectures.
float Dot(const float* a, const float* b, int n) {
#if defined(__x86_64__)
  if (HasAvx2()) return DotAvx2(a, b, n);
#endif
  return DotPortable(a, b, n);
}

void Axpy(float alpha, const float* x, float* y, int n) {
#if defined(__x86_64__)
  if (HasAvx2()) return AxpyAvx2(alpha, x, y, n);
#endif
  AxpyPortable(alpha, x, y, n);
}

void DotMany(const float* q, const float* keys, int count, int n, float scale, float* out) {
#if defined(__x86_64__)
  if (HasAvx2() && n % 8 == 0) return DotManyAvx2(q, keys, count, n, scale, out);
#endif
  for (int t = 0; t < count; ++t) out[t] = Dot(q, keys + static_cast<size_t>(t) * n, n) * scale;
}

void WeightedSum(const float* weights, const float* values, int count, int n, float* out) {
#if defined(__x86_64__)
  if (HasAvx2() && n % 8 == 0) return WeightedSumAvx2(weights, values, count, n, out);
#endif
  for (int t = 0; t < count; ++t) Axpy(weights[t], values + static_cast<size_t>(t) * n, out, n);
}

void WeightedSumPair(const float* weights_a, const float* weights_b, const float* values, int count,
                     int n, float* out_a, float* out_b) {
#if defined(__x86_64__)
  if (HasAvx2() && n % 8 == 0) {
    return WeightedSumPairAvx2(weights_a, weights_b, values, count, n, out_a, out_b);
  }
#endif
  WeightedSum(weights_a, values, count, n, out_a);
  WeightedSum(weights_b, values, count, n, out_b);
}

void RmsNorm(const float* x, const float* weight, int n, float eps, float* out) {
  const float mean_square = Dot(x, x, n) / static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(mean_square + eps);
  for (int i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void SiluMul(const float* gate, const float* up, int n, float* out) {
#if defined(__x86_64__)
  if (HasAvx2()) return SiluMulAvx2(gate, up, n, out);
#endif
  SiluMulPortable(gate, up, n, out);
}

void Softmax(float* x, int n) {
#if defined(__x86_64__)
  if (HasAvx2()) return SoftmaxAvx2(x, n);
#endif
  SoftmaxPortable(x, n);
}

float Exp(float x) { return ExpScalar(x); }

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

}  // namespace lockstep::engine
