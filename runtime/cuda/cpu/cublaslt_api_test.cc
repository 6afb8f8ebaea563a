// The cuBLASLt subset through its C API, on the CPU runtime's streams and memory: the
// wrapper's call shapes (yᵀ = op_T(w) · xᵀ) against a double-precision product for
// every I/O type pair, rows that do not depend on the batch without split-K, the
// heuristic's split-K choice and limits, the checks a GPU would fail (alignment,
// workspace, operands outside their allocations) and injected faults. Strided batches:
// cublaslt_batch_test.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/cublaslt_faults.h"
#include "runtime/cuda/cpu/cublaslt_test_util.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda_cpu::cublaslt_testing {
namespace {

TEST_F(CublasLtTest, VersionsAndStatusWords) {
  EXPECT_EQ(cublasLtGetVersion(), size_t{CUBLAS_VERSION});
  int major = 0, minor = -1, patch = -1;
  EXPECT_EQ(cublasGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetProperty(MINOR_VERSION, &minor), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetProperty(PATCH_LEVEL, &patch), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major * 10000 + minor * 100 + patch, CUBLAS_VERSION);
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_EXECUTION_FAILED),
               "the device program failed to execute");
}

TEST_F(CublasLtTest, AttributesFollowCublasLtSizeRules) {
  const Descs descs(Io::kBf16, 3, 5, 7);
  int32_t transa = -1;
  size_t written = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(descs.op, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                           sizeof(transa), &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(transa, CUBLAS_OP_T);
  EXPECT_EQ(written, sizeof(int32_t));
  written = 0;
  EXPECT_EQ(
      cublasLtMatmulDescGetAttribute(descs.op, CUBLASLT_MATMUL_DESC_EPILOGUE, nullptr, 0, &written),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof(uint32_t));
  const int64_t wide = CUBLAS_OP_N;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(descs.op, CUBLASLT_MATMUL_DESC_TRANSB, &wide, 8),
            CUBLAS_STATUS_INVALID_VALUE);
  const int64_t bias = 0;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(descs.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, 8),
            CUBLAS_STATUS_NOT_SUPPORTED);
  uint64_t rows = 0;
  EXPECT_EQ(
      cublasLtMatrixLayoutGetAttribute(descs.a, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, 8, &written),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 7u);
  uint32_t type = 0;
  EXPECT_EQ(
      cublasLtMatrixLayoutGetAttribute(descs.d, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, 4, &written),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(type, static_cast<uint32_t>(CUDA_R_16BF));
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  uint32_t align = 0;
  EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                 &align, 4, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(align, 256u);  // cuBLASLt's default assumption
  uint64_t workspace = 1;
  EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &workspace, 8, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(workspace, 0u);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulAlgo_t never_made{};
  uint32_t splits = 0;
  EXPECT_EQ(cublasLtMatmulAlgoConfigGetAttribute(&never_made, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                 &splits, 4, &written),
            CUBLAS_STATUS_INVALID_VALUE);
}

// Bits of output column `col` (one token of the batch) of y.
std::vector<float> Row(const std::vector<float>& y, int64_t n, int64_t row) {
  return std::vector<float>(y.begin() + row * n, y.begin() + (row + 1) * n);
}

TEST_F(CublasLtTest, MatchesADoubleProductForEveryIoType) {
  SCOPED_TRACE(::testing::Message() << "seed " << kSeed);
  std::mt19937_64 rng(kSeed);
  struct Shape {
    int64_t m, n, k;
  };
  for (Io io : {Io::kBf16, Io::kBf16ToF32, Io::kF32}) {
    for (const Shape& s :
         {Shape{1, 24, 40}, Shape{7, 520, 72}, Shape{33, 136, 1000}, Shape{5, 3, 4096}}) {
      SCOPED_TRACE(::testing::Message() << "io " << static_cast<int>(io) << " m=" << s.m
                                        << " n=" << s.n << " k=" << s.k);
      Problem pr(rng, io, s.m, s.n, s.k);
      cublasStatus_t status;
      const auto found = Ask(handle_, Descs(io, s.m, s.n, s.k), Prefs{}, &status);
      ASSERT_EQ(status, CUBLAS_STATUS_SUCCESS);
      ASSERT_FALSE(found.empty());
      DeviceBuffer workspace(32 << 20);
      for (const auto& result : found) {
        ASSERT_EQ(Gemm(pr, result.algo, workspace.ptr, workspace.bytes), CUBLAS_STATUS_SUCCESS);
        const std::vector<float> y = pr.Result();
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t j = 0; j < s.n; ++j) {
            double magnitude = 0;
            for (int64_t p = 0; p < s.k; ++p) {
              magnitude += std::abs(static_cast<double>(pr.x[i * s.k + p]) * pr.w[j * s.k + p]);
            }
            // fp32 chains (and split sums), then bf16 rounding of the output.
            const double exact = pr.Exact(i, j);
            const double tolerance = 1e-6 * s.k * magnitude / 8 + 1e-30 +
                                     (io == Io::kBf16 ? std::abs(exact) * 0x1p-8 : 0.0);
            ASSERT_LE(std::abs(y[i * s.n + j] - exact), tolerance)
                << "row " << i << " column " << j << " split-K " << SplitK(result.algo);
          }
        }
      }
    }
  }
}

// The contract the engine's batch-invariant mode relies on: without split-K, a row's
// bits do not depend on how many rows share the GEMM (nor on the algorithm).
TEST_F(CublasLtTest, RowsDoNotDependOnTheBatchWithoutSplitK) {
  std::mt19937_64 rng(kSeed + 1);
  const int64_t max_m = 67, n = 200, k = 1500;
  for (Io io : {Io::kBf16, Io::kBf16ToF32, Io::kF32}) {
    Problem pr(rng, io, max_m, n, k);
    Prefs prefs;
    prefs.reduction_mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasStatus_t status;
    const auto found = Ask(handle_, Descs(io, 128, n, k), prefs, &status);
    ASSERT_EQ(status, CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(found.size(), 4u);
    std::vector<float> first;
    for (const auto& result : found) {
      ASSERT_EQ(SplitK(result.algo), 1u);
      for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{17}, max_m}) {
        ASSERT_EQ(Gemm(pr, result.algo, nullptr, 0, m), CUBLAS_STATUS_SUCCESS);
        const std::vector<float> row0 = Row(pr.Result(), n, 0);
        if (first.empty()) first = row0;
        ASSERT_EQ(std::memcmp(row0.data(), first.data(), n * sizeof(float)), 0) << "m=" << m;
      }
    }
  }
}

TEST_F(CublasLtTest, HeuristicSplitsKForSmallBatchesWithinItsLimits) {
  cublasStatus_t status;
  // 4096 outputs = 32 tiles: 4 splits fit 132 SMs; a batch of 512 fills them without.
  auto found = Ask(handle_, Descs(Io::kBf16, 1, 4096, 4096), Prefs{}, &status);
  ASSERT_EQ(status, CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found.size(), 6u);
  EXPECT_EQ(SplitK(found[0].algo), 4u);
  EXPECT_EQ(found[0].workspaceSize, 4u * 4096 * 1 * 4);
  EXPECT_EQ(SplitK(found[1].algo), 2u);
  for (size_t i = 2; i < found.size(); ++i) EXPECT_EQ(SplitK(found[i].algo), 1u);
  found = Ask(handle_, Descs(Io::kBf16, 512, 4096, 4096), Prefs{}, &status);
  ASSERT_EQ(found.size(), 4u);
  for (const auto& r : found) EXPECT_EQ(SplitK(r.algo), 1u);
  // No reduction allowed, or no workspace: no split-K.
  Prefs none;
  none.reduction_mask = CUBLASLT_REDUCTION_SCHEME_NONE;
  EXPECT_EQ(Ask(handle_, Descs(Io::kBf16, 1, 4096, 4096), none, &status).size(), 4u);
  Prefs small;
  small.workspace = 2 * 4096 * 4;  // two splits' partials, not four
  found = Ask(handle_, Descs(Io::kBf16, 1, 4096, 4096), small, &status);
  ASSERT_EQ(found.size(), 5u);
  EXPECT_EQ(SplitK(found[0].algo), 2u);
  for (const auto& r : found) EXPECT_LE(r.workspaceSize, small.workspace);
  // A stated alignment below the element size: nothing can run.
  Prefs odd;
  odd.align[1] = 1;
  EXPECT_TRUE(Ask(handle_, Descs(Io::kBf16, 1, 64, 64), odd, &status).empty());
  EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST_F(CublasLtTest, UnsupportedSettingsAreNotSupported) {
  cublasStatus_t status;
  {
    Descs descs(Io::kF32, 4, 8, 16);
    const int32_t tf32 = CUBLAS_COMPUTE_32F_FAST_TF32;
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(descs.op, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &tf32, 4),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(Ask(handle_, descs, Prefs{}, &status).empty());
    EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {
    Descs descs(Io::kBf16, 4, 8, 16);
    const uint32_t relu = CUBLASLT_EPILOGUE_RELU;
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(descs.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, 4),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(Ask(handle_, descs, Prefs{}, &status).empty());
    EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {
    Descs descs(Io::kBf16, 4, 8, 16);
    const int32_t row = CUBLASLT_ORDER_ROW, batches = 2;
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(descs.a, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, 4),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(Ask(handle_, descs, Prefs{}, &status).empty());
    EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(descs.a, CUBLASLT_MATRIX_LAYOUT_ORDER, &batches, 4),
              CUBLAS_STATUS_SUCCESS);
    const int64_t plane = 64;
    ASSERT_EQ(
        cublasLtMatrixLayoutSetAttribute(descs.b, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, &plane, 8),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(Ask(handle_, descs, Prefs{}, &status).empty());
    EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {
    Descs descs(Io::kBf16, 4, 8, 16);
    const uint32_t pointers = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
    ASSERT_EQ(
        cublasLtMatrixLayoutSetAttribute(descs.a, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &pointers, 4),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(Ask(handle_, descs, Prefs{}, &status).empty());
    EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {
    // f32 in, bf16 out is not one of the subset's type combinations.
    Descs descs(Io::kF32, 4, 8, 16);
    const uint32_t bf16 = CUDA_R_16BF;
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(descs.d, CUBLASLT_MATRIX_LAYOUT_TYPE, &bf16, 4),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(Ask(handle_, descs, Prefs{}, &status).empty());
    EXPECT_EQ(status, CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {
    // Shapes that do not chain are invalid.
    Descs descs(Io::kBf16, 4, 8, 16);
    const uint64_t rows = 15;
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(descs.b, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, 8),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(Ask(handle_, descs, Prefs{}, &status).empty());
    EXPECT_EQ(status, CUBLAS_STATUS_INVALID_VALUE);
  }
}

// Split-K keeps its partial sums in the caller's workspace and adds them in split order:
// with f32 output, D is exactly that sum.
TEST_F(CublasLtTest, SplitKPartialsLiveInTheWorkspace) {
  std::mt19937_64 rng(kSeed + 2);
  Problem pr(rng, Io::kF32, 3, 64, 2048);
  cublasStatus_t status;
  const auto found = Ask(handle_, Descs(Io::kF32, 3, 64, 2048), Prefs{}, &status);
  ASSERT_FALSE(found.empty());
  const uint32_t splits = SplitK(found[0].algo);
  ASSERT_EQ(splits, 8u);
  DeviceBuffer workspace(found[0].workspaceSize);
  ASSERT_EQ(Gemm(pr, found[0].algo, workspace.ptr, workspace.bytes), CUBLAS_STATUS_SUCCESS);
  const std::vector<float> y = pr.Result();
  std::vector<float> partials(workspace.bytes / 4);
  ASSERT_EQ(cudaMemcpy(partials.data(), workspace.ptr, workspace.bytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  const int64_t mn = pr.m * pr.n, chunk = pr.k / splits;
  for (int64_t row = 0; row < pr.m; ++row) {
    for (int64_t col = 0; col < pr.n; ++col) {
      float sum = 0;
      for (uint32_t t = 0; t < splits; ++t) {
        // Split t's chain over its k range (D is n x m column-major: element col + row * n).
        float part = 0;
        for (int64_t p = t * chunk; p < (t + 1) * chunk; ++p) {
          part = std::fma(pr.w[col * pr.k + p], pr.x[row * pr.k + p], part);
        }
        ASSERT_EQ(partials[t * mn + col + row * pr.n], part) << "split " << t;
        sum = t == 0 ? part : sum + part;
      }
      ASSERT_EQ(y[row * pr.n + col], sum);
    }
  }
  // Too small a workspace is refused before anything runs.
  EXPECT_EQ(Gemm(pr, found[0].algo, workspace.ptr, workspace.bytes - 4),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(Gemm(pr, found[0].algo, nullptr, 0), CUBLAS_STATUS_INVALID_VALUE);
}

// An algorithm chosen for 256-byte aligned operands refuses a row-offset operand; one
// chosen for the offset's alignment runs on it.
TEST_F(CublasLtTest, AlgorithmsRequireTheAlignmentTheyWereChosenFor) {
  std::mt19937_64 rng(kSeed + 3);
  const int64_t skip = 3;
  Problem pr(rng, Io::kBf16, 21 + skip, 136, 264);  // rows of 528 bytes: x + 3 rows is 16-aligned
  const char* x = pr.dx.as<char>(skip * pr.k * 2);
  char* y = pr.dy.as<char>(skip * pr.n * 2);
  const cublasLtMatmulAlgo_t aligned = PlainAlgo(pr);
  EXPECT_EQ(Gemm(pr, aligned, nullptr, 0, 21, x, y), CUBLAS_STATUS_NOT_SUPPORTED);
  Prefs prefs;
  prefs.align[1] = 16;
  prefs.align[2] = prefs.align[3] = 16;
  const cublasLtMatmulAlgo_t offset = PlainAlgo(pr, prefs);
  ASSERT_EQ(Gemm(pr, offset, nullptr, 0, 21, x, y), CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = pr.Result();
  for (int64_t j = 0; j < pr.n; ++j) {
    EXPECT_NEAR(got[skip * pr.n + j], pr.Exact(skip, j),
                0.02 + 0x1p-7 * std::abs(pr.Exact(skip, j)));
  }
  // The NaN stays in the rows not written.
  EXPECT_TRUE(std::isnan(got[0]));
}

// The product reads its inputs when it runs on the stream (and at each replay of a
// captured graph), not when it is enqueued.
TEST_F(CublasLtTest, ReadsOperandsInStreamOrderAndUnderCapture) {
  std::mt19937_64 rng(kSeed + 4);
  Problem pr(rng, Io::kF32, 2, 8, 16);
  const cublasLtMatmulAlgo_t algo = PlainAlgo(pr);
  std::vector<float> ones(pr.m * pr.k, 1.0f);
  ASSERT_EQ(
      cudaMemcpyAsync(pr.dx.ptr, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice, stream_),
      cudaSuccess);
  ASSERT_EQ(Gemm(pr, algo, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  std::vector<float> y = pr.Result();
  for (int64_t j = 0; j < pr.n; ++j) {
    float sum = 0;
    for (int64_t p = 0; p < pr.k; ++p) sum = std::fma(pr.w[j * pr.k + p], 1.0f, sum);
    EXPECT_EQ(y[j], sum);
  }
  cudaStream_t capture;
  ASSERT_EQ(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking), cudaSuccess);
  std::swap(stream_, capture);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(Gemm(pr, algo, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  std::swap(stream_, capture);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  std::vector<float> twos(pr.m * pr.k, 2.0f);
  ASSERT_EQ(cudaMemcpy(pr.dx.ptr, twos.data(), twos.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  y = pr.Result();
  for (int64_t j = 0; j < pr.n; ++j) {
    float sum = 0;
    for (int64_t p = 0; p < pr.k; ++p) sum = std::fma(pr.w[j * pr.k + p], 2.0f, sum);
    EXPECT_EQ(y[j], sum);
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(capture), cudaSuccess);
}

TEST_F(CublasLtTest, InjectedFaultsFailTheNthMatmul) {
  std::mt19937_64 rng(kSeed + 5);
  Problem pr(rng, Io::kBf16, 2, 16, 16);
  const cublasLtMatmulAlgo_t algo = PlainAlgo(pr);
  testing::InjectCublasLtFault(CUBLAS_STATUS_NOT_SUPPORTED, 2);
  testing::InjectCublasLtFault(CUBLAS_STATUS_EXECUTION_FAILED, 3);
  EXPECT_EQ(Gemm(pr, algo, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(Gemm(pr, algo, nullptr, 0), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(Gemm(pr, algo, nullptr, 0), CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(Gemm(pr, algo, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// The injected M-dependent algorithm looks like any other (split-K 1, no reduction) but
// row 0's bits change with the batch: what the wrapper's invariance check must catch.
TEST_F(CublasLtTest, InjectedMDependentAlgorithmChangesRowsWithTheBatch) {
  std::mt19937_64 rng(kSeed + 7);
  Problem pr(rng, Io::kBf16ToF32, 64, 96, 2048);
  testing::InjectMDependentAlgorithm(2);
  Prefs prefs;
  prefs.reduction_mask = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasStatus_t status;
  EXPECT_EQ(Ask(handle_, Descs(pr.io, 128, pr.n, pr.k), prefs, &status).size(), 4u);
  const auto found = Ask(handle_, Descs(pr.io, 128, pr.n, pr.k), prefs, &status);
  ASSERT_EQ(found.size(), 5u);
  EXPECT_EQ(Ask(handle_, Descs(pr.io, 128, pr.n, pr.k), prefs, &status).size(), 4u);
  std::vector<float> rows[2][2];  // [candidate][m = 1 or 64]
  for (int candidate : {0, 1}) {
    EXPECT_EQ(SplitK(found[candidate].algo), 1u);
    EXPECT_EQ(found[candidate].workspaceSize, 0u);
    for (int big : {0, 1}) {
      ASSERT_EQ(Gemm(pr, found[candidate].algo, nullptr, 0, big ? pr.m : 1), CUBLAS_STATUS_SUCCESS);
      rows[candidate][big] = Row(pr.Result(), pr.n, 0);
    }
  }
  EXPECT_NE(rows[0][0], rows[0][1]);
  EXPECT_EQ(rows[0][0], rows[1][0]);  // alone, it is the plain chain
  EXPECT_EQ(rows[1][0], rows[1][1]);
}

// An operand that does not lie inside an allocation is an illegal address on the
// stream (sticky), as on a GPU.
TEST_F(CublasLtTest, OperandOutsideItsAllocationIsAnIllegalAddress) {
  std::mt19937_64 rng(kSeed + 6);
  Problem pr(rng, Io::kBf16, 4, 16, 32);
  const cublasLtMatmulAlgo_t algo = PlainAlgo(pr);
  // The weight claims 16 x 32 but only 15 rows of it are allocated.
  DeviceBuffer short_w(15 * 32 * 2);
  ASSERT_EQ(Gemm(pr, algo, nullptr, 0, pr.m, nullptr, nullptr, short_w.ptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorIllegalAddress);
  testing::ClearStickyErrors();
  cudaGetLastError();
  // Host memory the runtime did not allocate (aligned, so only the stream can tell).
  alignas(256) static Bf16 host[16 * 32];
  ASSERT_EQ(Gemm(pr, algo, nullptr, 0, pr.m, nullptr, nullptr, host), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorIllegalAddress);
  testing::ClearStickyErrors();
  cudaGetLastError();
}

}  // namespace
}  // namespace lockstep::cuda_cpu::cublaslt_testing
