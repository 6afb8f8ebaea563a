// FP8 weights as DeepSeek-V3-class checkpoints store them: OCP FP8 E4M3FN codes
// (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities; S.1111.111 is
// NaN; largest finite 448) with one f32 `weight_scale_inv` per 128 x 128 block of the
// weight. The edge blocks of a weight whose sides are not multiples of 128 are partial:
// the scale grid of a [rows, cols] weight is [ceil(rows / 128), ceil(cols / 128)], and
// the real value of element (r, c) is decode(code) * scale_inv[r / 128][c / 128],
// computed in f32 (what the checkpoint's reference dequantization computes).
//
// Loaders do not call this file: SafetensorsModel::ReadFloat (safetensors.h) is the one
// entry point for every tensor name. It returns f32 for F32, F16 and BF16 tensors and,
// for an F8_E4M3 tensor `<name>`, dequantizes it here with the F32 tensor
// `<name>_scale_inv` (missing or misshaped: an error naming both). make-model quantizes
// with QuantizeFp8Blocks.
//
// Pure functions; thread-safe.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_FP8_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_FP8_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace lockstep::engine {

inline constexpr int64_t kFp8BlockSize = 128;  // DeepSeek-V3's weight_block_size [128, 128]
inline constexpr float kFp8E4m3Max = 448.0f;
inline constexpr uint8_t kFp8E4m3NaN = 0x7f;  // S.1111.111 (either sign)

// The value of an E4M3FN code (exact; NaN for 0x7f and 0xff).
float Fp8E4m3ToFloat(uint8_t code);

// The nearest E4M3FN code to `value`, ties to the even code; magnitudes past 448
// (infinities included) saturate to +-448; NaN gives kFp8E4m3NaN with its sign.
uint8_t FloatToFp8E4m3(float value);

// The scale grid of a [rows, cols] weight: {ceil(rows / 128), ceil(cols / 128)}.
std::vector<int64_t> Fp8ScaleShape(int64_t rows, int64_t cols);

// out[r * cols + c] = Fp8E4m3ToFloat(codes[r * cols + c]) * scale_inv[block of (r, c)].
// InvalidArgument when a size disagrees with rows x cols or its scale grid.
absl::Status DequantizeFp8Blocks(absl::Span<const uint8_t> codes, int64_t rows, int64_t cols,
                                 absl::Span<const float> scale_inv, absl::Span<float> out);

// A [rows, cols] weight quantized block by block: each block's scale_inv is its largest
// magnitude / 448 (1 for an all-zero block), its codes FloatToFp8E4m3(value / scale_inv).
struct Fp8Blocks {
  std::vector<uint8_t> codes;    // rows x cols
  std::vector<float> scale_inv;  // Fp8ScaleShape(rows, cols), row-major
};
Fp8Blocks QuantizeFp8Blocks(absl::Span<const float> values, int64_t rows, int64_t cols);

// The name of the scale tensor of the FP8 tensor `name` (`<name>_scale_inv`).
std::string Fp8ScaleName(const std::string& name);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_FP8_H_
