// GPU checks of the cuBLASLt GEMM wrapper against the CPU engine's Gemm
// (runtime/engine/cpu/gemm.h) in f32 on the same bf16-rounded inputs (relative L2 <= 1e-2),
// the algorithm cache (also for offset, 16-byte aligned operands), and batch-invariant mode: a
// row's bits do not depend on how many rows share the GEMM; strided batches of per-head
// products. Skips without a GPU (gpu_test_env.h).
#include "runtime/cuda/kernels/cublaslt_gemm.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/gemm_key.h"
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/engine/cpu/gemm.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;
using testing::DeviceArray;
using testing::HasNaN;
using testing::RandomBf16Floats;
using testing::RelativeL2;
using testing::RoundedToBf16;
using testing::ToBf16;
using testing::ToFloat;

constexpr double kTolerance = 1e-2;

struct Shape {
  int64_t m, n, k;
};

std::unique_ptr<CublasLtGemm> MakeGemm(bool batch_invariant) {
  absl::StatusOr<std::unique_ptr<CublasLtGemm>> gemm =
      CublasLtGemm::Create(nullptr, {.batch_invariant = batch_invariant});
  EXPECT_TRUE(gemm.ok()) << gemm.status();
  return gemm.ok() ? std::move(*gemm) : nullptr;
}

TEST(CublasLtGemmTest, MatchesCpuGemm) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (bool invariant : {false, true}) {
    std::unique_ptr<CublasLtGemm> gemm = MakeGemm(invariant);
    ASSERT_NE(gemm, nullptr);
    // 1 row, odd sizes, and 1B/8B-shaped projections (q, kv, mlp down).
    for (const Shape& s : {Shape{1, 2048, 2048}, Shape{7, 520, 72}, Shape{33, 1024, 8192},
                           Shape{300, 4096, 4096}, Shape{64, 1000, 3000}}) {
      SCOPED_TRACE(::testing::Message()
                   << "m=" << s.m << " n=" << s.n << " k=" << s.k << " invariant=" << invariant);
      const std::vector<float> x = RandomBf16Floats(rng, s.m * s.k);
      const std::vector<float> w = RandomBf16Floats(rng, s.n * s.k, 0.05f);
      DeviceArray<Bf16> dx(ToBf16(x)), dw(ToBf16(w)), dy(s.m * s.n);
      ASSERT_EQ(dy.Poison(), cudaSuccess);
      ASSERT_TRUE(gemm->Gemm(dx.get(), s.m, dw.get(), s.n, s.k, dy.get()).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> got = ToFloat(dy.Download());
      std::vector<float> ref(s.m * s.n);
      const engine::PackedMatrix packed =
          engine::PackedMatrix::Pack(w, static_cast<int>(s.n), static_cast<int>(s.k));
      engine::Gemm(x.data(), static_cast<int>(s.m), static_cast<int>(s.k), packed, nullptr,
                   ref.data(), static_cast<int>(s.n), nullptr);
      ASSERT_FALSE(HasNaN(got));
      EXPECT_LE(RelativeL2(got, RoundedToBf16(ref)), kTolerance);
    }
  }
}

// The f32-output GEMM (logits): no output rounding, so it tracks the CPU far closer.
TEST(CublasLtGemmTest, F32OutputMatchesCpuGemm) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::unique_ptr<CublasLtGemm> gemm = MakeGemm(true);
  ASSERT_NE(gemm, nullptr);
  for (const Shape& s : {Shape{1, 60, 2048}, Shape{9, 32000, 512}, Shape{64, 8, 4096}}) {
    SCOPED_TRACE(::testing::Message() << "m=" << s.m << " n=" << s.n << " k=" << s.k);
    const std::vector<float> x = RandomBf16Floats(rng, s.m * s.k);
    const std::vector<float> w = RandomBf16Floats(rng, s.n * s.k, 0.05f);
    DeviceArray<Bf16> dx(ToBf16(x)), dw(ToBf16(w));
    DeviceArray<float> dy(s.m * s.n);
    ASSERT_EQ(dy.Poison(), cudaSuccess);
    ASSERT_TRUE(gemm->Gemm(dx.get(), s.m, dw.get(), s.n, s.k, dy.get()).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = dy.Download();
    std::vector<float> ref(s.m * s.n);
    engine::Gemm(x.data(), static_cast<int>(s.m), static_cast<int>(s.k),
                 engine::PackedMatrix::Pack(w, static_cast<int>(s.n), static_cast<int>(s.k)),
                 nullptr, ref.data(), static_cast<int>(s.n), nullptr);
    ASSERT_FALSE(HasNaN(got));
    EXPECT_LE(RelativeL2(got, ref), 1e-3);
  }
  // bf16 and f32 outputs keep separate algorithms.
  EXPECT_EQ(gemm->cached_algorithms(), 3u);
}

TEST(CublasLtGemmTest, CachesOneAlgorithmPerBucket) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  for (bool invariant : {false, true}) {
    std::unique_ptr<CublasLtGemm> gemm = MakeGemm(invariant);
    ASSERT_NE(gemm, nullptr);
    DeviceArray<Bf16> dx(64 * 256), dw(256 * 256), dy(64 * 256);
    ASSERT_EQ(dx.Poison(), cudaSuccess);  // values do not matter here
    for (int64_t m : {5, 6, 8, 33, 64}) {
      ASSERT_TRUE(gemm->Gemm(dx.get(), m, dw.get(), 256, 256, dy.get()).ok());
    }
    // Buckets 8, 64 (or one key in batch-invariant mode); descriptors per M.
    EXPECT_EQ(gemm->cached_algorithms(), invariant ? 1u : 2u);
    EXPECT_EQ(gemm->cached_descriptors(), 5u);
    ASSERT_TRUE(gemm->Gemm(dx.get(), 33, dw.get(), 256, 256, dy.get()).ok());
    EXPECT_EQ(gemm->cached_descriptors(), 5u);  // reused, not made again
    EXPECT_FALSE(gemm->Gemm(dx.get(), 0, dw.get(), 256, 256, dy.get()).ok());
  }
}

// A per-expert GEMM's operands start at row offsets of a permuted buffer: x + 3 rows
// of 264 bf16 (16-byte aligned, not 256). The algorithm is chosen for that alignment
// (its own cache entry) and the result matches the CPU.
TEST(CublasLtGemmTest, OffsetPointersGetAnAlgorithmForTheirAlignment) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const int64_t m = 21, n = 136, k = 264, skip = 3;
  std::unique_ptr<CublasLtGemm> gemm = MakeGemm(false);
  ASSERT_NE(gemm, nullptr);
  const std::vector<float> x = RandomBf16Floats(rng, (skip + m) * k);
  const std::vector<float> w = RandomBf16Floats(rng, n * k, 0.05f);
  DeviceArray<Bf16> dx(ToBf16(x)), dw(ToBf16(w)), dy((skip + m) * n);
  ASSERT_EQ(AddressAlignment(dx.get() + skip * k), 16u);
  for (const int64_t offset : {int64_t{0}, skip}) {
    SCOPED_TRACE(::testing::Message() << "rows from " << offset);
    ASSERT_EQ(dy.Poison(), cudaSuccess);
    const absl::Status status =
        gemm->Gemm(dx.get() + offset * k, m, dw.get(), n, k, dy.get() + offset * n);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> all = ToFloat(dy.Download());
    const std::vector<float> got(all.begin() + offset * n, all.begin() + (offset + m) * n);
    std::vector<float> ref(m * n);
    engine::Gemm(x.data() + offset * k, static_cast<int>(m), static_cast<int>(k),
                 engine::PackedMatrix::Pack(w, static_cast<int>(n), static_cast<int>(k)), nullptr,
                 ref.data(), static_cast<int>(n), nullptr);
    ASSERT_FALSE(HasNaN(got));
    EXPECT_LE(RelativeL2(got, RoundedToBf16(ref)), kTolerance);
  }
  EXPECT_EQ(gemm->cached_algorithms(), 2u);  // 256-byte and 16-byte aligned operands
}

TEST(CublasLtGemmTest, BatchInvariantRowsDoNotDependOnTheBatch) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::unique_ptr<CublasLtGemm> gemm = MakeGemm(true);
  ASSERT_NE(gemm, nullptr);
  const int64_t n = 4096, k = 4096, max_m = 512;
  const std::vector<float> x = RandomBf16Floats(rng, max_m * k);
  const std::vector<float> w = RandomBf16Floats(rng, n * k, 0.05f);
  DeviceArray<Bf16> dx(ToBf16(x)), dw(ToBf16(w)), dy(max_m * n);
  // Row 0's result for batches of 1 .. 512 rows.
  std::vector<Bf16> first;
  for (int64_t m : {1, 2, 3, 8, 17, 64, 129, 512}) {
    ASSERT_EQ(dy.Poison(), cudaSuccess);
    ASSERT_TRUE(gemm->Gemm(dx.get(), m, dw.get(), n, k, dy.get()).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<Bf16> y = dy.Download();
    if (first.empty()) {
      first.assign(y.begin(), y.begin() + n);
      continue;
    }
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(y[j].bits, first[j].bits) << "m=" << m << " column " << j;
    }
  }
}

// The batch-invariance check at first use: the real one passes cuBLASLt's choice for a
// 1B projection; an injected check that refuses candidate 0 makes the wrapper fall back
// to candidate 1 (counted), and refusing every candidate is an error naming them.
TEST(CublasLtGemmTest, BatchInvariantModeFallsBackPastANonInvariantCandidate) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  DeviceArray<Bf16> dx(512 * 2048), dw(3072 * 2048), dy(512 * 3072);
  ASSERT_EQ(dx.Poison(), cudaSuccess);
  {
    std::unique_ptr<CublasLtGemm> gemm = MakeGemm(true);
    ASSERT_NE(gemm, nullptr);
    ASSERT_TRUE(gemm->Gemm(dx.get(), 4, dw.get(), 3072, 2048, dy.get()).ok());
    EXPECT_EQ(gemm->invariance_fallbacks(), 0);
  }
  std::vector<int> checked;
  GemmOptions options{.batch_invariant = true};
  options.invariance_check_for_test = [&](int candidate) -> absl::StatusOr<bool> {
    checked.push_back(candidate);
    return candidate != 0;
  };
  absl::StatusOr<std::unique_ptr<CublasLtGemm>> gemm = CublasLtGemm::Create(nullptr, options);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  const absl::Status s = (*gemm)->Gemm(dx.get(), 4, dw.get(), 3072, 2048, dy.get());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ((*gemm)->invariance_fallbacks(), 1);
  ASSERT_FALSE(checked.empty());
  EXPECT_EQ(checked.front(), 0);
  options.invariance_check_for_test = [](int) -> absl::StatusOr<bool> { return false; };
  gemm = CublasLtGemm::Create(nullptr, options);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  const absl::Status none = (*gemm)->Gemm(dx.get(), 4, dw.get(), 3072, 2048, dy.get());
  EXPECT_EQ(none.code(), absl::StatusCode::kNotFound) << none;
  EXPECT_NE(none.message().find("candidate 0: row 0 differs"), std::string::npos) << none;
}

// MLA's per-head projections as one strided batch: the absorbed query (q_nope of each
// head times its [nope, lora] W_UK, not transposed, f32 out) and W_UV (each head's
// [vdim, lora] rows, transposed, bf16 out), on rows that interleave the heads, against a
// double product per head; in batch-invariant mode row 0 of every head keeps its bits
// for any number of rows. Bad layouts are InvalidArgument.
TEST(CublasLtGemmTest, StridedBatchesOfHeadsMatchAPerHeadProduct) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const int64_t heads = 4, nope = 48, rope = 16, lora = 96, vdim = 40, rows = 19;
  const int64_t qk = nope + rope, per_head = (nope + vdim) * lora;
  const std::vector<float> q = RandomBf16Floats(rng, rows * heads * qk);
  const std::vector<float> kv_b = RandomBf16Floats(rng, heads * per_head, 0.1f);
  DeviceArray<Bf16> dq(ToBf16(q)), dkv_b(ToBf16(kv_b)), dout(rows * heads * vdim);
  DeviceArray<float> dlat(rows * heads * (lora + 8));
  for (bool invariant : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "invariant=" << invariant);
    std::unique_ptr<CublasLtGemm> gemm = MakeGemm(invariant);
    ASSERT_NE(gemm, nullptr);
    const GemmBatch uk{.count = heads,
                       .x_ld = heads * qk,
                       .x_stride = qk,
                       .w_ld = lora,
                       .w_stride = per_head,
                       .y_ld = heads * (lora + 8),
                       .y_stride = lora + 8,
                       .w_transposed = false};
    const GemmBatch uv{.count = heads,
                       .x_ld = heads * qk,
                       .x_stride = qk,
                       .w_ld = lora,
                       .w_stride = per_head,
                       .y_ld = heads * vdim,
                       .y_stride = vdim};
    std::vector<float> lat0, out0;
    for (int64_t m : {rows, int64_t{1}, int64_t{3}}) {
      ASSERT_EQ(dlat.Poison(), cudaSuccess);
      ASSERT_EQ(dout.Poison(), cudaSuccess);
      // W_UK: [m, nope] · [nope, lora] per head (n = lora, k = nope).
      absl::Status s = gemm->BatchedGemm(dq.get(), m, dkv_b.get(), lora, nope, dlat.get(), uk);
      ASSERT_TRUE(s.ok()) << s;
      // W_UV: [m, lora] · [vdim, lora]ᵀ per head, reading the q rows' first lora values
      // of each head (k = lora <= qk is not needed: x_ld and x_stride say where).
      s = gemm->BatchedGemm(dq.get(), m, dkv_b.get() + nope * lora, vdim, std::min(lora, qk),
                            dout.get(), uv);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> lat = dlat.Download();
      const std::vector<float> out = ToFloat(dout.Download());
      const int64_t kv = std::min(lora, qk);
      std::vector<float> got_lat, ref_lat, got_out, ref_out;
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t j = 0; j < lora; ++j) {
            double v = 0;
            for (int64_t i = 0; i < nope; ++i) {
              v += static_cast<double>(q[(r * heads + h) * qk + i]) *
                   kv_b[h * per_head + i * lora + j];
            }
            ref_lat.push_back(static_cast<float>(v));
            got_lat.push_back(lat[(r * heads + h) * (lora + 8) + j]);
          }
          for (int64_t j = 0; j < vdim; ++j) {
            double v = 0;
            for (int64_t c = 0; c < kv; ++c) {
              v += static_cast<double>(q[(r * heads + h) * qk + c]) *
                   kv_b[h * per_head + (nope + j) * lora + c];
            }
            ref_out.push_back(static_cast<float>(v));
            got_out.push_back(out[(r * heads + h) * vdim + j]);
          }
        }
      }
      ASSERT_FALSE(HasNaN(got_lat));
      ASSERT_FALSE(HasNaN(got_out));
      EXPECT_LE(RelativeL2(got_lat, ref_lat), 1e-5) << "m=" << m;
      EXPECT_LE(RelativeL2(got_out, RoundedToBf16(ref_out)), kTolerance) << "m=" << m;
      if (!invariant) continue;
      // Row 0 of every head: the same bits at every m.
      std::vector<float> lat_row(got_lat.begin(), got_lat.begin() + heads * lora);
      std::vector<float> out_row(got_out.begin(), got_out.begin() + heads * vdim);
      if (lat0.empty()) {
        lat0 = lat_row;
        out0 = out_row;
        continue;
      }
      for (size_t i = 0; i < lat0.size(); ++i)
        ASSERT_EQ(lat_row[i], lat0[i]) << "m=" << m << " " << i;
      for (size_t i = 0; i < out0.size(); ++i)
        ASSERT_EQ(out_row[i], out0[i]) << "m=" << m << " " << i;
    }
    if (invariant) EXPECT_EQ(gemm->invariance_fallbacks(), 0);
    // An ld shorter than a row, a negative stride, no products.
    GemmBatch bad = uk;
    bad.y_ld = lora - 1;
    EXPECT_EQ(gemm->BatchedGemm(dq.get(), 2, dkv_b.get(), lora, nope, dlat.get(), bad).code(),
              absl::StatusCode::kInvalidArgument);
    bad = uk;
    bad.x_stride = -qk;
    EXPECT_EQ(gemm->BatchedGemm(dq.get(), 2, dkv_b.get(), lora, nope, dlat.get(), bad).code(),
              absl::StatusCode::kInvalidArgument);
    bad = uk;
    bad.count = 0;
    EXPECT_EQ(gemm->BatchedGemm(dq.get(), 2, dkv_b.get(), lora, nope, dlat.get(), bad).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels
