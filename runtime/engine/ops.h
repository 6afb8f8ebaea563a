// Elementwise and reduction kernels of the forward. Every function computes each output
// with a fixed sequence of float operations that depends only on its arguments (never
// on batch size or thread), so results are reproducible bit for bit. Dot and Axpy use
// AVX2+FMA when available; the portable versions produce the same bits.
#ifndef LOCKSTEP_RUNTIME_ENGINE_OPS_H_
#define LOCKSTEP_RUNTIME_ENGINE_OPS_H_

#include <cstdint>

namespace lockstep::engine {

// sum a[i] * b[i]: eight interleaved FMA lanes, a fixed reduction tree, then the tail.
float Dot(const float* a, const float* b, int n);

// y[i] = fma(alpha, x[i], y[i]).
void Axpy(float alpha, const float* x, float* y, int n);

// out = x / sqrt(mean(x^2) + eps) * weight (out may alias x).
void RmsNorm(const float* x, const float* weight, int n, float eps, float* out);

// out[i] = silu(gate[i]) * up[i].
void SiluMul(const float* gate, const float* up, int n, float* out);

// Rotary embedding tables for one position: cos/sin of position * inv_freq[i],
// i < head_dim / 2.
void RopeAngles(int64_t position, const double* inv_freq, int half, float* cos, float* sin);

// Rotates each of `num_heads` vectors of `head_dim` in place (pairs i, i + head_dim/2).
void ApplyRope(float* x, int num_heads, int head_dim, const float* cos, const float* sin);

// In place: x = softmax(x); returns nothing. Sequential sum (deterministic).
void Softmax(float* x, int n);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_OPS_H_
