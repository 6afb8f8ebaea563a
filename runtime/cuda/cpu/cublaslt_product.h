// The arithmetic of the CPU execution layer's cublasLtMatmul: op(A) · op(B) over a range
// of k as one fused multiply-add chain per output element, in k order, in fp32 (bf16
// inputs widened exactly), and the epilogue that scales, adds C and rounds to the
// output type. Every output element is the same chain whatever the matrix sizes, the
// blocking or the instruction set (AVX2 lanes or scalar std::fma give the same bits), so
// a row's result does not depend on how many rows share the product.
//
// Pure host code on host-addressable memory; thread-compatible (no shared state but the
// instruction-set choice, made once).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_PRODUCT_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_PRODUCT_H_

#include <cstdint>

namespace lockstep::cuda_cpu {

enum class ElementType { kBf16, kF32 };

// A column-major matrix as stored: element (r, c) at data[r + c * ld]; `transposed`
// says the product uses its transpose (CUBLAS_OP_T).
struct MatrixOperand {
  const void* data = nullptr;
  ElementType type = ElementType::kF32;
  int64_t ld = 0;
  bool transposed = false;
};

// acc[i + j * m] = fma(op(A)[i, p], op(B)[p, j], acc[i + j * m]) for p = k0 .. k1 - 1 in
// order, for every i < m, j < n. op(A) is m x k, op(B) k x n. `acc` is m x n, column-major.
void AccumulateProduct(const MatrixOperand& a, const MatrixOperand& b, int64_t m, int64_t n,
                       int64_t k0, int64_t k1, float* acc);

// The same with scalar std::fma only (tests compare it with the default path).
void AccumulateProductScalar(const MatrixOperand& a, const MatrixOperand& b, int64_t m, int64_t n,
                             int64_t k0, int64_t k1, float* acc);

// Whether AccumulateProduct uses AVX2 and FMA instructions on this CPU.
bool ProductUsesAvx2();

// A column-major matrix written by the epilogue.
struct OutputMatrix {
  void* data = nullptr;
  ElementType type = ElementType::kF32;
  int64_t ld = 0;
};

// D[i, j] = fma(beta, C[i, j], alpha * s) with s = partials[0][i + j * m] + partials[1][...]
// + ... (plain fp32 additions in partial order), or alpha * s when beta == 0 (C is then
// not read: it may hold NaN poison), rounded to D's type (bf16: to nearest even). The
// `partial_count` m x n blocks lie `partial_stride` floats apart. C (its `transposed`
// ignored) may be D.
void WriteOutput(const float* partials, int partial_count, int64_t partial_stride, int64_t m,
                 int64_t n, float alpha, float beta, const MatrixOperand& c, const OutputMatrix& d);

}  // namespace lockstep::cuda_cpu

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_PRODUCT_H_
