#include "runtime/cuda/cpu/nccl/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace lockstep::cuda_cpu::nccl {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
T Combine(ncclRedOp_t op, T a, T b) {
  switch (op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
    default:  // ncclSum, ncclAvg
      return a + b;
  }
}

// Reduces elements stored as `Stored`, computed as `Acc`.
template <typename Stored, typename Acc, Acc (*Load)(Stored), Stored (*Store)(Acc)>
void ReduceAs(ncclRedOp_t op, const std::vector<const void*>& inputs, size_t count, void* out) {
  const size_t n = inputs.size();
  for (size_t i = 0; i < count; ++i) {
    Acc acc = Load(static_cast<const Stored*>(inputs[0])[i]);
    for (size_t r = 1; r < n; ++r)
      acc = Combine(op, acc, Load(static_cast<const Stored*>(inputs[r])[i]));
    if (op == ncclAvg) acc = static_cast<Acc>(acc / static_cast<Acc>(n));
    static_cast<Stored*>(out)[i] = Store(acc);
  }
}

template <typename T>
T Same(T v) {
  return v;
}

template <typename T>
void ReducePlain(ncclRedOp_t op, const std::vector<const void*>& inputs, size_t count, void* out) {
  ReduceAs<T, T, Same<T>, Same<T>>(op, inputs, count, out);
}

}  // namespace

size_t TypeBytes(int type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

bool Reducible(int type) {
  return TypeBytes(type) != 0 && type != ncclFloat8e4m3 && type != ncclFloat8e5m2;
}

bool ValidRedOp(int op) { return op >= ncclSum && op < ncclNumOps; }

const char* TypeName(int type) {
  static const char* const kNames[] = {"int8",    "uint8",    "int32",      "uint32",
                                       "int64",   "uint64",   "float16",    "float32",
                                       "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  if (type >= 0 && type < ncclNumTypes) return kNames[type];
  return "unknown type";
}

const char* RedOpName(int op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  if (ValidRedOp(op)) return kNames[op];
  return "unknown op";
}

void ReduceInRankOrder(ncclDataType_t type, ncclRedOp_t op, const std::vector<const void*>& inputs,
                       size_t count, void* out) {
  switch (type) {
    case ncclInt8:
      return ReducePlain<int8_t>(op, inputs, count, out);
    case ncclUint8:
      return ReducePlain<uint8_t>(op, inputs, count, out);
    case ncclInt32:
      return ReducePlain<int32_t>(op, inputs, count, out);
    case ncclUint32:
      return ReducePlain<uint32_t>(op, inputs, count, out);
    case ncclInt64:
      return ReducePlain<int64_t>(op, inputs, count, out);
    case ncclUint64:
      return ReducePlain<uint64_t>(op, inputs, count, out);
    case ncclFloat32:
      return ReducePlain<float>(op, inputs, count, out);
    case ncclFloat64:
      return ReducePlain<double>(op, inputs, count, out);
    case ncclFloat16:
      return ReduceAs<uint16_t, float, HalfToFloat, FloatToHalf>(op, inputs, count, out);
    case ncclBfloat16:
      return ReduceAs<uint16_t, float, Bfloat16ToFloat, FloatToBfloat16>(op, inputs, count, out);
    default:
      return;  // Refused before an operation is enqueued (Reducible).
  }
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return FromBits(sign | 0x7f800000 | (mantissa << 13));
  return FromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float f) {
  const uint32_t x = Bits(f);
  const uint16_t sign = (x >> 16) & 0x8000;
  const uint32_t magnitude = x & 0x7fffffff;
  if (magnitude > 0x7f800000) return sign | 0x7e00;   // NaN
  if (magnitude >= 0x477ff000) return sign | 0x7c00;  // rounds past 65504: infinity
  if (magnitude < 0x38800000) {                       // below 2^-14: subnormal or zero
    // Exact scaling by 2^24, then round to nearest even.
    const float scaled = std::ldexp(FromBits(magnitude), 24);
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t h = (magnitude >> 13) - ((127 - 15) << 10);
  const uint32_t rest = magnitude & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1) != 0)) ++h;
  return sign | static_cast<uint16_t>(h);
}

float Bfloat16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBfloat16(float f) {
  const uint32_t x = Bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace lockstep::cuda_cpu::nccl
