// Strided batches of the cuBLASLt subset (BATCH_COUNT, STRIDED_BATCH_OFFSET) through its C
// API on the CPU runtime: per-head products over interleaved rows equal their products
// run one by one, and the batch layouts the subset does not run are refused.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/cublaslt_test_util.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda_cpu::cublaslt_testing {
namespace {

// A strided batch in cuBLASLt's column-major terms: D (n x m) = op(A) · (B: k x m) per
// batch, each operand with its own ld and batch stride (elements).
struct BatchDescs {
  struct Operand {
    int64_t ld, stride;
  };
  BatchDescs(Io io, int64_t m, int64_t n, int64_t k, bool transa, int32_t count, Operand a_op,
             Operand b_op, Operand d_op) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const int32_t t = transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
              CUBLAS_STATUS_SUCCESS);
    const auto make = [&](cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows,
                          int64_t cols, Operand o) {
      EXPECT_EQ(cublasLtMatrixLayoutCreate(layout, type, rows, cols, o.ld), CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                 &count, sizeof(count)),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(
          cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                           &o.stride, sizeof(o.stride)),
          CUBLAS_STATUS_SUCCESS);
    };
    make(&a, InType(io), transa ? k : n, transa ? n : k, a_op);
    make(&b, InType(io), k, m, b_op);
    make(&d, OutType(io), n, m, d_op);
  }
  ~BatchDescs() {
    cublasLtMatrixLayoutDestroy(d);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatmulDescDestroy(op);
  }
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
};

// Per-head products as MLA's absorbed projections make them: x rows hold `heads` vectors
// of k (ld heads * k, stride k), y rows `heads` outputs of n, the weights one [n, k]
// (transposed) or [k, n] matrix per head, `wstride` apart. Every output equals the same
// product run unbatched on that head's slices (bitwise: the same chains), for each I/O
// type and with split-K.
TEST_F(CublasLtTest, StridedBatchesEqualTheirProductsOneByOne) {
  std::mt19937_64 rng(kSeed + 7);
  const int32_t heads = 3;
  const int64_t m = 5, n = 12, k = 600, wstride = (n + 4) * k;
  for (Io io : {Io::kBf16, Io::kBf16ToF32, Io::kF32}) {
    for (bool transa : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "io " << static_cast<int>(io) << " transa " << transa);
      // x, w and y of the whole batch, as one problem's buffers ("m" rows of heads * k).
      Problem all(rng, io, m, heads * wstride / k, heads * k);
      DeviceBuffer dy(m * heads * n * OutBytes(io));
      ASSERT_EQ(cudaMemset(dy.ptr, 0xFF, dy.bytes), cudaSuccess);
      const BatchDescs batch(io, m, n, k, transa, heads, {transa ? k : n, wstride}, {heads * k, k},
                             {heads * n, n});
      cublasStatus_t status;
      cublasLtMatmulPreference_t pref = nullptr;
      ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
      const uint64_t workspace_bytes = 1 << 20;
      ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace_bytes, 8),
                CUBLAS_STATUS_SUCCESS);
      // The heads' slices (run one by one below) are aligned to their element only.
      const uint32_t in_align = InBytes(io), out_align = OutBytes(io);
      for (const auto& [attribute, bytes] :
           {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, in_align},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, in_align},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, out_align},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, out_align}}) {
        ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &bytes, 4),
                  CUBLAS_STATUS_SUCCESS);
      }
      cublasLtMatmulHeuristicResult_t results[8];
      int found = 0;
      status = cublasLtMatmulAlgoGetHeuristic(handle_, batch.op, batch.a, batch.b, batch.d, batch.d,
                                              pref, 8, results, &found);
      ASSERT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(status, CUBLAS_STATUS_SUCCESS);
      ASSERT_GE(found, 2);
      ASSERT_EQ(SplitK(results[0].algo), 2u) << "3 x 1 tiles of k 600 split in two";
      DeviceBuffer workspace(workspace_bytes);
      for (int r = 0; r < found; ++r) {
        const float alpha = 1.0f, beta = 0.0f;
        ASSERT_EQ(cublasLtMatmul(handle_, batch.op, &alpha, all.dw.ptr, batch.a, all.dx.ptr,
                                 batch.b, &beta, dy.ptr, batch.d, dy.ptr, batch.d, &results[r].algo,
                                 workspace.ptr, workspace.bytes, stream_),
                  CUBLAS_STATUS_SUCCESS);
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        std::vector<uint8_t> batched(dy.bytes);
        ASSERT_EQ(cudaMemcpy(batched.data(), dy.ptr, dy.bytes, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        for (int32_t h = 0; h < heads; ++h) {
          const BatchDescs one(io, m, n, k, transa, 1, {transa ? k : n, 0}, {heads * k, 0},
                               {heads * n, 0});
          DeviceBuffer dy_one(dy.bytes);
          ASSERT_EQ(
              cublasLtMatmul(handle_, one.op, &alpha, all.dw.as<char>(h * wstride * InBytes(io)),
                             one.a, all.dx.as<char>(h * k * InBytes(io)), one.b, &beta,
                             dy_one.as<char>(h * n * OutBytes(io)), one.d,
                             dy_one.as<char>(h * n * OutBytes(io)), one.d, &results[r].algo,
                             workspace.ptr, workspace.bytes, stream_),
              CUBLAS_STATUS_SUCCESS);
          std::vector<uint8_t> alone(dy.bytes);
          ASSERT_EQ(cudaMemcpy(alone.data(), dy_one.ptr, dy.bytes, cudaMemcpyDeviceToHost),
                    cudaSuccess);
          for (int64_t row = 0; row < m; ++row) {
            const size_t at = (row * heads * n + h * n) * OutBytes(io);
            ASSERT_EQ(std::memcmp(batched.data() + at, alone.data() + at, n * OutBytes(io)), 0)
                << "head " << h << " row " << row << " candidate " << r;
          }
        }
        // And near the exact product: head 1, row 2, output 3.
        double exact = 0;
        for (int64_t p = 0; p < k; ++p) {
          const float w = transa ? all.w[wstride + 3 * k + p] : all.w[wstride + p * n + 3];
          exact += static_cast<double>(all.x[2 * heads * k + k + p]) * w;
        }
        float got;
        if (io == Io::kBf16) {
          Bf16 b;
          std::memcpy(&b, batched.data() + (2 * heads * n + n + 3) * 2, 2);
          got = Bf16ToFloat(b);
        } else {
          std::memcpy(&got, batched.data() + (2 * heads * n + n + 3) * 4, 4);
        }
        EXPECT_NEAR(got, exact, 1e-3 + std::abs(exact) * 0x1p-7);
      }
    }
  }
}

TEST_F(CublasLtTest, BatchLayoutsOutsideTheSubsetAreRefused) {
  std::mt19937_64 rng(kSeed + 8);
  cublasStatus_t status;
  const auto ask = [&](const BatchDescs& d) {
    cublasLtMatmulPreference_t pref = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t results[8];
    int found = 0;
    status =
        cublasLtMatmulAlgoGetHeuristic(handle_, d.op, d.a, d.b, d.d, d.d, pref, 8, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    return found;
  };
  // D's batches overlapping: which product wrote an element would depend on the order.
  EXPECT_EQ(ask(BatchDescs(Io::kF32, 4, 8, 16, true, 2, {16, 128}, {16, 64}, {8, 16})), 0);
  EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(ask(BatchDescs(Io::kF32, 4, 8, 16, true, 2, {16, 128}, {16, 64}, {16, 4})), 0);
  EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
  // Interleaved within ld, or one after another: fine; a stride of 0 on A repeats it.
  EXPECT_GT(ask(BatchDescs(Io::kF32, 4, 8, 16, true, 2, {16, 0}, {16, 64}, {16, 8})), 0);
  EXPECT_GT(ask(BatchDescs(Io::kF32, 4, 8, 16, true, 2, {16, 128}, {16, 64}, {8, 32})), 0);
  // Negative strides.
  EXPECT_EQ(ask(BatchDescs(Io::kF32, 4, 8, 16, true, 2, {16, -128}, {16, 64}, {8, 32})), 0);
  EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
  {
    // Batch counts that differ between the operands.
    BatchDescs d(Io::kF32, 4, 8, 16, true, 2, {16, 128}, {16, 64}, {8, 32});
    const int32_t three = 3;
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(d.b, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &three, 4),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(ask(d), 0);
    EXPECT_EQ(status, CUBLAS_STATUS_INVALID_VALUE);
  }
  // The last batch's operand past its allocation is an illegal address on the stream.
  Problem pr(rng, Io::kF32, 4, 8, 16);
  const BatchDescs d(Io::kF32, 4, 8, 16, true, 2, {16, 0}, {16, 0}, {8, 32});
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  ASSERT_EQ(
      cublasLtMatmulAlgoGetHeuristic(handle_, d.op, d.a, d.b, d.d, d.d, pref, 1, &result, &found),
      CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreferenceDestroy(pref);
  ASSERT_EQ(found, 1);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasLtMatmul(handle_, d.op, &alpha, pr.dw.ptr, d.a, pr.dx.ptr, d.b, &beta, pr.dy.ptr,
                           d.d, pr.dy.ptr, d.d, &result.algo, nullptr, 0, stream_),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorIllegalAddress);
  testing::ClearStickyErrors();
  cudaGetLastError();
}

}  // namespace
}  // namespace lockstep::cuda_cpu::cublaslt_testing
