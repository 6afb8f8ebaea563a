// The rotary position embedding of a model: its inverse frequencies (plain RoPE,
// theta^(-2i/d), or YaRN's blend of interpolated and extrapolated frequencies), the
// magnitude YaRN multiplies cos and sin by, and the interleaved rotation the DeepSeek
// family uses (pairs 2i, 2i + 1; ops.h's ApplyRope rotates pairs i, i + d/2).
//
// Pure functions; thread-safe.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_ROPE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_ROPE_H_

#include <vector>

#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {

// rope_dim() / 2 inverse frequencies. With YaRN (DeepSeek-V3 / the YaRN paper): the
// dimensions rotating fewer than beta_slow times over original_max_position are
// interpolated (frequency / factor), those rotating more than beta_fast times are kept,
// and a linear ramp blends the ones between.
std::vector<double> RopeInverseFrequencies(const ModelConfig& config);

// What cos and sin are multiplied by (YaRN's RopeMagnitude; 1 without YaRN).
float RopeMagnitude(const ModelConfig& config);

// Rotates, in each of `count` vectors `stride` floats apart, the `dim` values at x:
// pairs (2i, 2i + 1) by the angle of cos[i], sin[i].
void ApplyRopeInterleaved(float* x, int count, int stride, int dim, const float* cos,
                          const float* sin);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_ROPE_H_
