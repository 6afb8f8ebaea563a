// Elementwise and reduction kernels of the forward. Every function computes each output
// with a fixed sequence of float operations that depends only on its arguments (never
// on batch size or thread), so results are reproducible bit for bit. Dot and Axpy use
// AVX2+FMA when available; the portable versions produce the same bits.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_OPS_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_OPS_H_

#include <cstdint>

namespace lockstep::engine {

// sum a[i] * b[i]: eight interleaved FMA lanes, a fixed reduction tree, then the tail.
float Dot(const float* a, const float* b, int n);

// y[i] = fma(alpha, x[i], y[i]).
void Axpy(float alpha, const float* x, float* y, int n);

// out[t] = Dot(q, keys + t * n, n) * scale for t < count: the same bits as Dot, several
// keys at a time.
void DotMany(const float* q, const float* keys, int count, int n, float scale, float* out);

// For t < count in order: Axpy(weights[t], values + t * n, out, n); the same bits,
// with `out` kept in registers.
void WeightedSum(const float* weights, const float* values, int count, int n, float* out);

// WeightedSum for two weight vectors over the same values (two query heads sharing a
// KV head); the same bits as two WeightedSum calls, twice the independent FMA chains.
void WeightedSumPair(const float* weights_a, const float* weights_b, const float* values, int count,
                     int n, float* out_a, float* out_b);

// out = x / sqrt(mean(x^2) + eps) * weight (out may alias x).
void RmsNorm(const float* x, const float* weight, int n, float eps, float* out);

// out[i] = silu(gate[i]) * up[i].
void SiluMul(const float* gate, const float* up, int n, float* out);

// Rotary embedding tables for one position: cos/sin of position * inv_freq[i],
// i < head_dim / 2.
void RopeAngles(int64_t position, const double* inv_freq, int half, float* cos, float* sin);

// Rotates each of `num_heads` vectors of `head_dim` in place (pairs i, i + head_dim/2).
void ApplyRope(float* x, int num_heads, int head_dim, const float* cos, const float* sin);

// In place: x = softmax(x).
void Softmax(float* x, int n);

// exp(x) to about 2 ulp for x in [-87, 88] (clamped outside); the scalar form of the
// exponential Softmax and SiluMul use.
float Exp(float x);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_OPS_H_
