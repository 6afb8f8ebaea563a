// NCCL's data types and reduction operators on the host: element sizes, names for
// messages, and the reduction of the ranks' inputs in rank order (so every rank
// computes the same bits). 16-bit floats are combined in float and rounded once to
// nearest even; integer ncclAvg truncates the sum divided by the number of ranks.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_REDUCE_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_REDUCE_H_

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::cuda_cpu::nccl {

// Bytes per element, or 0 for a type NCCL does not define.
size_t TypeBytes(int type);
// Whether `type` can be reduced here (every type but the fp8 ones).
bool Reducible(int type);
// Whether `op` is one of NCCL's built-in operators.
bool ValidRedOp(int op);
// "float32", "sum": for messages; unknown values read "type 42", "op 42".
const char* TypeName(int type);
const char* RedOpName(int op);

// out[i] = inputs[0][i] op inputs[1][i] op ... for i < count. `out` may alias an input.
void ReduceInRankOrder(ncclDataType_t type, ncclRedOp_t op, const std::vector<const void*>& inputs,
                       size_t count, void* out);

// IEEE half and bfloat16 conversions, rounding to nearest even (NaN stays NaN).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bfloat16ToFloat(uint16_t b);
uint16_t FloatToBfloat16(float f);

}  // namespace lockstep::cuda_cpu::nccl

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_REDUCE_H_
