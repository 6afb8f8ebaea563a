// Helpers of the cuBLASLt subset's API tests (cublaslt_api_test, cublaslt_batch_test):
// the wrapper's I/O type pairs, descriptors and heuristic preferences of
// y [m, n] = x [m, k] · w [n, k]ᵀ, random problems uploaded to poisoned device memory with
// their double-precision product, and a fixture holding a cuBLASLt handle and a stream.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_TEST_UTIL_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_TEST_UTIL_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/cublaslt_faults.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda_cpu::cublaslt_testing {

using ::lockstep::cuda::kernels::Bf16;
using ::lockstep::cuda::kernels::Bf16ToFloat;
using ::lockstep::cuda::kernels::FloatToBf16;

constexpr uint64_t kSeed = 20261205;

// The element types of one GEMM, as the wrapper's three calls.
enum class Io { kBf16, kBf16ToF32, kF32 };
inline cudaDataType_t InType(Io io) { return io == Io::kF32 ? CUDA_R_32F : CUDA_R_16BF; }
inline cudaDataType_t OutType(Io io) { return io == Io::kBf16 ? CUDA_R_16BF : CUDA_R_32F; }
inline size_t InBytes(Io io) { return io == Io::kF32 ? 4 : 2; }
inline size_t OutBytes(Io io) { return io == Io::kBf16 ? 2 : 4; }

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
inline std::vector<cublasLtMatmulHeuristicResult_t> Ask(cublasLtHandle_t handle, const Descs& descs,
                                                        const Prefs& prefs,
                                                        cublasStatus_t* status) {
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

inline uint32_t SplitK(const cublasLtMatmulAlgo_t& algo) {
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

}  // namespace lockstep::cuda_cpu::cublaslt_testing

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_TEST_UTIL_H_
