#include "runtime/engine/model/fp8.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {
namespace {

// The values of codes 0..127 (positive; 0x7f is NaN). Codes 0..126 increase strictly,
// so the nearest code to a magnitude is found by a search over this table.
std::array<float, 128> MakePositiveTable() {
  std::array<float, 128> table{};
  for (int code = 0; code < 128; ++code) {
    const int exponent = code >> 3;
    const int mantissa = code & 7;
    table[code] = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)  // subnormal
                                : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  }
  table[kFp8E4m3NaN] = std::nanf("");
  return table;
}

const std::array<float, 128>& PositiveTable() {
  static const std::array<float, 128> table = MakePositiveTable();
  return table;
}

constexpr uint8_t kMaxFiniteCode = 0x7e;  // 448

}  // namespace

float Fp8E4m3ToFloat(uint8_t code) {
  const float magnitude = PositiveTable()[code & 0x7f];
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

uint8_t FloatToFp8E4m3(float value) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  if (std::isnan(value)) return sign | kFp8E4m3NaN;
  const float magnitude = std::fabs(value);
  if (magnitude >= kFp8E4m3Max) return sign | kMaxFiniteCode;
  const std::array<float, 128>& table = PositiveTable();
  // The first code whose value is >= magnitude (1..126: magnitude < 448 = table[126]).
  const int above = static_cast<int>(
      std::lower_bound(table.begin(), table.begin() + kMaxFiniteCode + 1, magnitude) -
      table.begin());
  if (table[above] == magnitude) return sign | static_cast<uint8_t>(above);
  const int below = above - 1;
  // Midpoints of neighbouring E4M3 values have at most 5 significant bits: exact in f32.
  const float middle = (table[below] + table[above]) * 0.5f;
  int code;
  if (magnitude < middle) {
    code = below;
  } else if (magnitude > middle) {
    code = above;
  } else {
    code = (below & 1) == 0 ? below : above;  // tie: the even code (mantissa LSB 0)
  }
  return sign | static_cast<uint8_t>(code);
}

std::vector<int64_t> Fp8ScaleShape(int64_t rows, int64_t cols) {
  return {(rows + kFp8BlockSize - 1) / kFp8BlockSize, (cols + kFp8BlockSize - 1) / kFp8BlockSize};
}

absl::Status DequantizeFp8Blocks(absl::Span<const uint8_t> codes, int64_t rows, int64_t cols,
                                 absl::Span<const float> scale_inv, absl::Span<float> out) {
  const std::vector<int64_t> grid = Fp8ScaleShape(rows, cols);
  const size_t elements = static_cast<size_t>(rows * cols);
  if (rows < 0 || cols < 0 || codes.size() != elements || out.size() != elements ||
      scale_inv.size() != static_cast<size_t>(grid[0] * grid[1])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fp8 dequantization of [", rows, ", ", cols, "]: ", codes.size(), " codes, ",
        out.size(), " outputs and ", scale_inv.size(), " scales (needs [", grid[0], ", ",
        grid[1], "])"));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* scales = scale_inv.data() + (r / kFp8BlockSize) * grid[1];
    const uint8_t* row = codes.data() + r * cols;
    float* dst = out.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) dst[c] = Fp8E4m3ToFloat(row[c]) * scales[c / kFp8BlockSize];
  }
  return absl::OkStatus();
}

Fp8Blocks QuantizeFp8Blocks(absl::Span<const float> values, int64_t rows, int64_t cols) {
  const std::vector<int64_t> grid = Fp8ScaleShape(rows, cols);
  Fp8Blocks blocks;
  blocks.codes.resize(static_cast<size_t>(rows * cols));
  blocks.scale_inv.assign(static_cast<size_t>(grid[0] * grid[1]), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float& amax = blocks.scale_inv[(r / kFp8BlockSize) * grid[1] + c / kFp8BlockSize];
      amax = std::max(amax, std::fabs(values[r * cols + c]));
    }
  }
  for (float& scale : blocks.scale_inv) scale = scale > 0.0f ? scale / kFp8E4m3Max : 1.0f;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float scale = blocks.scale_inv[(r / kFp8BlockSize) * grid[1] + c / kFp8BlockSize];
      blocks.codes[r * cols + c] = FloatToFp8E4m3(values[r * cols + c] / scale);
    }
  }
  return blocks;
}

std::string Fp8ScaleName(const std::string& name) { return name + "_scale_inv"; }

}  // namespace lockstep::engine
