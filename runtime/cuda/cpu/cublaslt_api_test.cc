// The cuBLASLt subset through its C API, on the CPU runtime's streams and memory: the
// wrapper's call shapes (yᵀ = op_T(w) · xᵀ) against a double-precision product for
// every I/O type pair, rows that do not depend on the batch without split-K, the
// heuristic's split-K choice and limits, the checks a GPU would fail (alignment,
// workspace, operands outside their allocations) and injected faults; strided batches
// (per-head products over interleaved rows) equal their products run one by one, and
// the batch layouts the subset does not run are refused.
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
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda_cpu {
namespace {

using ::lockstep::cuda::kernels::Bf16;
using ::lockstep::cuda::kernels::Bf16ToFloat;
using ::lockstep::cuda::kernels::FloatToBf16;

constexpr uint64_t kSeed = 20261205;

// The element types of one GEMM, as the wrapper's three calls.
enum class Io { kBf16, kBf16ToF32, kF32 };
cudaDataType_t InType(Io io) { return io == Io::kF32 ? CUDA_R_32F : CUDA_R_16BF; }
cudaDataType_t OutType(Io io) { return io == Io::kBf16 ? CUDA_R_16BF : CUDA_R_32F; }
size_t InBytes(Io io) { return io == Io::kF32 ? 4 : 2; }
size_t OutBytes(Io io) { return io == Io::kBf16 ? 2 : 4; }

// The descriptors of y [m, n] = x [m, k] · w [n, k]ᵀ in cuBLASLt's column-major terms:
// D (n x m) = op_T(A: k x n) · (B: k x m), C = D.
struct Descs {
  Descs(Io io, int64_t m, int64_t n, int64_t k) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const int32_t t = CUBLAS_OP_T;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, InType(io), k, n, k), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&b, InType(io), k, m, k), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&d, OutType(io), n, m, n), CUBLAS_STATUS_SUCCESS);
  }
  ~Descs() {
    cublasLtMatrixLayoutDestroy(d);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatmulDescDestroy(op);
  }
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
};

struct Prefs {
  uint64_t workspace = 32 << 20;
  uint32_t align[4] = {256, 256, 256, 256};
  uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
};

// The heuristic's answers for `descs` (up to 8).
std::vector<cublasLtMatmulHeuristicResult_t> Ask(cublasLtHandle_t handle, const Descs& descs,
                                                 const Prefs& prefs, cublasStatus_t* status) {
  cublasLtMatmulPreference_t pref = nullptr;
  EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &prefs.workspace, sizeof(prefs.workspace)),
            CUBLAS_STATUS_SUCCESS);
  const cublasLtMatmulPreferenceAttributes_t aligns[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &prefs.align[i], 4),
              CUBLAS_STATUS_SUCCESS);
  }
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &prefs.reduction_mask, 4),
            CUBLAS_STATUS_SUCCESS);
  std::vector<cublasLtMatmulHeuristicResult_t> results(8);
  int found = -1;
  *status = cublasLtMatmulAlgoGetHeuristic(handle, descs.op, descs.a, descs.b, descs.d, descs.d,
                                           pref, 8, results.data(), &found);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
  results.resize(found < 0 ? 0 : found);
  return results;
}

uint32_t SplitK(const cublasLtMatmulAlgo_t& algo) {
  uint32_t splits = 0;
  size_t written = 0;
  EXPECT_EQ(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                 sizeof(splits), &written),
            CUBLAS_STATUS_SUCCESS);
  return splits;
}

// Device memory (poisoned by the runtime), freed at the end.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : bytes(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  template <typename T>
  T* as(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(ptr) + byte_offset);
  }
  void* ptr = nullptr;
  size_t bytes;
};

// Random inputs x [m, k] and w [n, k] (bf16-representable for bf16 in), uploaded.
struct Problem {
  Problem(std::mt19937_64& rng, Io io, int64_t m, int64_t n, int64_t k)
      : io(io),
        m(m),
        n(n),
        k(k),
        dx(m * k * InBytes(io)),
        dw(n * k * InBytes(io)),
        dy(m * n * OutBytes(io)) {
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    const auto fill = [&](std::vector<float>& v, const DeviceBuffer& dev, size_t count) {
      v.resize(count);
      std::vector<uint8_t> bytes(count * InBytes(io));
      for (size_t i = 0; i < count; ++i) {
        v[i] = value(rng);
        if (io == Io::kF32) {
          std::memcpy(&bytes[4 * i], &v[i], 4);
        } else {
          const Bf16 b = FloatToBf16(v[i]);
          v[i] = Bf16ToFloat(b);
          std::memcpy(&bytes[2 * i], &b, 2);
        }
      }
      EXPECT_EQ(cudaMemcpy(dev.ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
                cudaSuccess);
    };
    fill(x, dx, m * k);
    fill(w, dw, n * k);
    // y (C and D) starts as NaN: with beta 0 the product must not read it.
    EXPECT_EQ(cudaMemset(dy.ptr, 0xFF, dy.bytes), cudaSuccess);
  }
  // y as floats (bf16 widened), after synchronizing the device.
  std::vector<float> Result() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> bytes(m * n * OutBytes(io));
    EXPECT_EQ(cudaMemcpy(bytes.data(), dy.ptr, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<float> y(m * n);
    for (size_t i = 0; i < y.size(); ++i) {
      if (io == Io::kBf16) {
        Bf16 b;
        std::memcpy(&b, &bytes[2 * i], 2);
        y[i] = Bf16ToFloat(b);
      } else {
        std::memcpy(&y[i], &bytes[4 * i], 4);
      }
    }
    return y;
  }
  double Exact(int64_t row, int64_t col) const {
    double s = 0;
    for (int64_t p = 0; p < k; ++p) s += static_cast<double>(x[row * k + p]) * w[col * k + p];
    return s;
  }

  Io io;
  int64_t m, n, k;
  std::vector<float> x, w;
  DeviceBuffer dx, dw, dy;
};

class CublasLtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    EXPECT_EQ(cublasLtDestroy(handle_), CUBLAS_STATUS_SUCCESS);
    testing::ClearCublasLtFaults();
  }

  // Enqueues y = x · wᵀ for `problem` with `algo` (x and y may be offset by whole rows).
  cublasStatus_t Gemm(const Problem& pr, const cublasLtMatmulAlgo_t& algo, void* workspace,
                      size_t workspace_bytes, int64_t m = -1, const void* x = nullptr,
                      void* y = nullptr, const void* w = nullptr) {
    if (m < 0) m = pr.m;
    const Descs descs(pr.io, m, pr.n, pr.k);
    const float alpha = 1.0f, beta = 0.0f;
    void* out = y != nullptr ? y : pr.dy.ptr;
    return cublasLtMatmul(handle_, descs.op, &alpha, w != nullptr ? w : pr.dw.ptr, descs.a,
                          x != nullptr ? x : pr.dx.ptr, descs.b, &beta, out, descs.d, out, descs.d,
                          &algo, workspace, workspace_bytes, stream_);
  }

  // The heuristic's first algorithm without split-K for `pr` at the given alignments.
  cublasLtMatmulAlgo_t PlainAlgo(const Problem& pr, Prefs prefs = {}) {
    prefs.reduction_mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasStatus_t status;
    const auto found = Ask(handle_, Descs(pr.io, pr.m, pr.n, pr.k), prefs, &status);
    EXPECT_EQ(status, CUBLAS_STATUS_SUCCESS);
    EXPECT_FALSE(found.empty());
    return found.empty() ? cublasLtMatmulAlgo_t{} : found[0].algo;
  }

  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

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
}  // namespace lockstep::cuda_cpu
