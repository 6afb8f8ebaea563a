// GPU checks of the MoE kernels: routing against the CPU engine's RouteTopK
// (runtime/engine/cpu/moe_route.h), exact wherever the gap between the k-th and (k+1)-th
// logit exceeds 1e-3 and on exact ties (lower id wins); the permutation against its host
// reference (moe_permutation.h), exactly; gather + per-expert GEMMs + combine against the
// CPU Gemm and Axpy combine in f32 on bf16-rounded inputs (relative L2 <= 1e-2). Skips
// without a GPU (gpu_test_env.h).
#include "runtime/cuda/kernels/moe_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/cublaslt_gemm.h"
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/cuda/kernels/moe_expert_gemm.h"
#include "runtime/cuda/kernels/moe_permutation.h"
#include "runtime/engine/cpu/gemm.h"
#include "runtime/engine/cpu/moe_route.h"
#include "runtime/engine/cpu/ops.h"

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

struct RouteShape {
  int num_experts, k;
  bool renormalize;
};

// The gap between the k-th and (k+1)-th largest logit of a row (infinite when k = E).
float TopKGap(const float* logits, int num_experts, int k) {
  if (k >= num_experts) return INFINITY;
  std::vector<float> sorted(logits, logits + num_experts);
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  return sorted[k - 1] - sorted[k];
}

TEST(MoeKernelsTest, RouteMatchesCpu) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  // mixtral, qwen1.5-moe, qwen3-moe, the largest supported, and k = E.
  for (const RouteShape& shape :
       {RouteShape{8, 2, false}, RouteShape{60, 4, true}, RouteShape{128, 8, true},
        RouteShape{512, 16, false}, RouteShape{3, 3, true}}) {
    SCOPED_TRACE(::testing::Message() << shape.num_experts << " experts, top " << shape.k);
    const int rows = 301;
    const int e = shape.num_experts;
    std::vector<float> logits = RandomBf16Floats(rng, static_cast<size_t>(rows) * e, 2.0f);
    // Exact ties: row 0 all equal (experts 0..k-1 win), row 1 pairs of equal values.
    std::fill(logits.begin(), logits.begin() + e, 0.5f);
    for (int i = 0; i + 1 < e; i += 2) logits[e + i + 1] = logits[e + i];
    DeviceArray<float> dlogits(logits), dweights(static_cast<size_t>(rows) * shape.k);
    DeviceArray<int32_t> dexperts(static_cast<size_t>(rows) * shape.k);
    ASSERT_EQ(dweights.Poison(), cudaSuccess);
    ASSERT_EQ(dexperts.Poison(), cudaSuccess);
    ASSERT_EQ(LaunchMoeRoute(dlogits.get(), rows, e, shape.k, shape.renormalize, dexperts.get(),
                             dweights.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> experts = dexperts.Download();
    const std::vector<float> weights = dweights.Download();
    ASSERT_FALSE(HasNaN(weights));
    std::vector<int> ref_experts(shape.k);
    std::vector<float> ref_weights(shape.k), probs(e);
    int checked = 0;
    for (int r = 0; r < rows; ++r) {
      const float* row = logits.data() + static_cast<size_t>(r) * e;
      engine::RouteTopK(row, e, shape.k, shape.renormalize, ref_experts.data(), ref_weights.data(),
                        probs.data());
      if (r >= 2 && TopKGap(row, e, shape.k) <= 1e-3f) continue;
      ++checked;
      for (int j = 0; j < shape.k; ++j) {
        ASSERT_EQ(experts[r * shape.k + j], ref_experts[j]) << "row " << r << " choice " << j;
        EXPECT_NEAR(weights[r * shape.k + j], ref_weights[j], 1e-5f) << "row " << r;
      }
    }
    EXPECT_GT(checked, rows / 2) << "too few rows with a clear top-k";
  }
}

// Rows whose router logits hold a NaN or an infinity (every probability NaN): the
// kernel picks what RouteTopK picks (experts 0..k-1, in range), so the permutation
// gives every entry a slot.
TEST(MoeKernelsTest, NanLogitsRouteInRangeAsTheCpuDoes) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const RouteShape& shape : {RouteShape{8, 2, true}, RouteShape{60, 4, false},
                                  RouteShape{512, 16, true}, RouteShape{3, 3, false}}) {
    SCOPED_TRACE(::testing::Message() << shape.num_experts << " experts, top " << shape.k);
    const int e = shape.num_experts, k = shape.k, rows = 5;
    std::vector<float> logits(static_cast<size_t>(rows) * e);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) - 3.0f;
    logits[0 * e + e - 1] = nan;                                      // one NaN, last expert
    std::fill(logits.begin() + 1 * e, logits.begin() + 2 * e, nan);   // all NaN
    logits[2 * e + e / 2] = inf;                                      // +inf
    std::fill(logits.begin() + 3 * e, logits.begin() + 4 * e, -inf);  // all -inf
    // Row 4 stays finite: its experts are checked too.
    DeviceArray<float> dlogits(logits), dweights(static_cast<size_t>(rows) * k);
    DeviceArray<int32_t> dexperts(static_cast<size_t>(rows) * k), doffsets(e + 1),
        dentry(static_cast<size_t>(rows) * k), dslot(static_cast<size_t>(rows) * k);
    ASSERT_EQ(dexperts.Poison(), cudaSuccess);
    ASSERT_EQ(dentry.Poison(), cudaSuccess);
    ASSERT_EQ(dslot.Poison(), cudaSuccess);
    ASSERT_EQ(LaunchMoeRoute(dlogits.get(), rows, e, k, shape.renormalize, dexperts.get(),
                             dweights.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(LaunchMoePermute(dexperts.get(), rows * k, e, doffsets.get(), dentry.get(),
                               dslot.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> experts = dexperts.Download();
    const std::vector<float> weights = dweights.Download();
    std::vector<int> ref_experts(k);
    std::vector<float> ref_weights(k), probs(e);
    for (int r = 0; r < rows; ++r) {
      engine::RouteTopK(logits.data() + static_cast<size_t>(r) * e, e, k, shape.renormalize,
                        ref_experts.data(), ref_weights.data(), probs.data());
      for (int j = 0; j < k; ++j) {
        ASSERT_EQ(experts[r * k + j], ref_experts[j]) << "row " << r << " choice " << j;
        EXPECT_EQ(std::isnan(weights[r * k + j]), std::isnan(ref_weights[j])) << "row " << r;
      }
    }
    absl::StatusOr<MoePermutation> ref = PermuteToExperts(experts, k, e);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(dentry.Download(), ref->entry_of_slot);
    EXPECT_EQ(dslot.Download(), ref->slot_of_entry);
  }
}

TEST(MoeKernelsTest, PermutationMatchesHostReference) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const auto& [num_experts, k, rows] : std::vector<std::tuple<int, int, int>>{
           {8, 2, 1}, {60, 4, 77}, {128, 8, 4096}, {512, 1, 3}}) {
    SCOPED_TRACE(::testing::Message()
                 << num_experts << " experts, k " << k << ", " << rows << " rows");
    std::vector<int32_t> experts(static_cast<size_t>(rows) * k);
    // Skewed: half the entries go to the first few experts, so some experts get none.
    for (int32_t& x : experts) {
      x = static_cast<int32_t>(rng() % 2 ? rng() % std::min(4, num_experts) : rng() % num_experts);
    }
    absl::StatusOr<MoePermutation> ref = PermuteToExperts(experts, k, num_experts);
    ASSERT_TRUE(ref.ok()) << ref.status();
    DeviceArray<int32_t> dexperts(experts), doffsets(num_experts + 1), dentry(experts.size()),
        dslot(experts.size());
    ASSERT_EQ(doffsets.Poison(), cudaSuccess);
    ASSERT_EQ(dentry.Poison(), cudaSuccess);
    ASSERT_EQ(dslot.Poison(), cudaSuccess);
    ASSERT_EQ(LaunchMoePermute(dexperts.get(), static_cast<int>(experts.size()), num_experts,
                               doffsets.get(), dentry.get(), dslot.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(doffsets.Download(), ref->expert_offsets);
    EXPECT_EQ(dentry.Download(), ref->entry_of_slot);
    EXPECT_EQ(dslot.Download(), ref->slot_of_entry);
  }
}

// Gather, one linear layer per expert, combine: out[row] = sum_j w_j * x[row] · W_{e_j}ᵀ.
TEST(MoeKernelsTest, GatherExpertGemmCombineMatchesCpu) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const int num_experts = 8, k = 2, hidden = 264, out_dim = 136, rows = 37;
  std::vector<int32_t> experts;
  std::vector<float> gates;
  {
    const std::vector<float> logits = RandomBf16Floats(rng, rows * num_experts, 2.0f);
    std::vector<int> chosen(k);
    std::vector<float> w(k), probs(num_experts);
    for (int r = 0; r < rows; ++r) {
      engine::RouteTopK(logits.data() + r * num_experts, num_experts, k, true, chosen.data(),
                        w.data(), probs.data());
      experts.insert(experts.end(), chosen.begin(), chosen.end());
      gates.insert(gates.end(), w.begin(), w.end());
    }
  }
  absl::StatusOr<MoePermutation> perm = PermuteToExperts(experts, k, num_experts);
  ASSERT_TRUE(perm.ok());
  const std::vector<float> x = RandomBf16Floats(rng, rows * hidden);
  std::vector<std::vector<float>> w(num_experts);
  std::vector<std::unique_ptr<DeviceArray<Bf16>>> dw;
  std::vector<const Bf16*> dw_ptrs;
  for (int e = 0; e < num_experts; ++e) {
    w[e] = RandomBf16Floats(rng, out_dim * hidden, 0.1f);
    dw.push_back(std::make_unique<DeviceArray<Bf16>>(ToBf16(w[e])));
    dw_ptrs.push_back(dw.back()->get());
  }
  const int entries = rows * k;
  DeviceArray<Bf16> dx(ToBf16(x)), dx_perm(entries * hidden), dy_perm(entries * out_dim),
      dout(rows * out_dim);
  DeviceArray<int32_t> dentry(perm->entry_of_slot), dslot(perm->slot_of_entry);
  DeviceArray<float> dgates(gates);
  ASSERT_EQ(dout.Poison(), cudaSuccess);
  ASSERT_EQ(dy_perm.Poison(), cudaSuccess);
  ASSERT_EQ(LaunchMoeGather(dx.get(), hidden, dentry.get(), entries, k, dx_perm.get(), nullptr),
            cudaSuccess);
  absl::StatusOr<std::unique_ptr<CublasLtGemm>> gemm = CublasLtGemm::Create(nullptr, {});
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  ASSERT_TRUE(GroupedExpertGemm(**gemm, dx_perm.get(), perm->expert_offsets, dw_ptrs, out_dim,
                                hidden, dy_perm.get())
                  .ok());
  ASSERT_EQ(LaunchMoeCombine(dy_perm.get(), out_dim, dslot.get(), dgates.get(), rows, k, dout.get(),
                             nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = ToFloat(dout.Download());
  ASSERT_FALSE(HasNaN(got));

  std::vector<float> ref(rows * out_dim, 0.0f), y(out_dim);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < k; ++j) {
      const int e = experts[r * k + j];
      const engine::PackedMatrix packed = engine::PackedMatrix::Pack(w[e], out_dim, hidden);
      engine::Gemm(x.data() + r * hidden, 1, hidden, packed, nullptr, y.data(), out_dim, nullptr);
      engine::Axpy(gates[r * k + j], y.data(), ref.data() + r * out_dim, out_dim);
    }
  }
  // The kernel combines bf16 expert outputs; 1e-2 covers that and the GEMM.
  EXPECT_LE(RelativeL2(got, RoundedToBf16(ref)), 1e-2);
}

// The expert-parallel send layout: LaunchMoeScatter puts slot s's row at dest[s] (rows
// outside dest stay as they were), LaunchMoeCombineFrom reads slot s's row back from
// dest[s]: bit for bit what a host loop does (f32 fused multiply-adds from 0, rounded
// once to the element type), in bf16 and in f32.
template <typename T>
void ScatterAndCombineFrom(std::mt19937_64& rng) {
  const int num_experts = 6, k = 2, hidden = 40, rows = 23;
  const int entries = rows * k;
  std::vector<int32_t> experts(entries);
  for (int r = 0; r < rows; ++r) {  // two distinct experts per row, ascending
    const int a = static_cast<int>(rng() % (num_experts - 1));
    experts[r * k] = a;
    experts[r * k + 1] = a + 1 + static_cast<int>(rng() % (num_experts - 1 - a));
  }
  absl::StatusOr<MoePermutation> perm = PermuteToExperts(experts, k, num_experts);
  ASSERT_TRUE(perm.ok()) << perm.status();
  // dest: slots spread over twice as many rows, in a random order (gaps stay poisoned).
  const int capacity = 2 * entries;
  std::vector<int32_t> places(capacity);
  for (int i = 0; i < capacity; ++i) places[i] = i;
  std::shuffle(places.begin(), places.end(), rng);
  const std::vector<int32_t> dest(places.begin(), places.begin() + entries);
  const std::vector<float> x = RandomBf16Floats(rng, static_cast<size_t>(rows) * hidden);
  std::vector<T> x_elems;
  for (float v : x) {
    if constexpr (std::is_same_v<T, float>) {
      x_elems.push_back(v);
    } else {
      x_elems.push_back(FloatToBf16(v));
    }
  }
  auto as_float = [](T v) {
    if constexpr (std::is_same_v<T, float>) {
      return v;
    } else {
      return Bf16ToFloat(v);
    }
  };
  DeviceArray<T> dx(x_elems), dsend(static_cast<size_t>(capacity) * hidden),
      dout(static_cast<size_t>(rows) * hidden);
  DeviceArray<int32_t> dentry(perm->entry_of_slot), dslot(perm->slot_of_entry), ddest(dest);
  ASSERT_EQ(dsend.Poison(), cudaSuccess);
  ASSERT_EQ(dout.Poison(), cudaSuccess);
  ASSERT_EQ(LaunchMoeScatter(dx.get(), hidden, dentry.get(), ddest.get(), entries, k, dsend.get(),
                             nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<T> sent = dsend.Download();
  ASSERT_EQ(sent.size(), static_cast<size_t>(capacity) * hidden);
  std::vector<bool> used(capacity, false);
  for (int s = 0; s < entries; ++s) {
    used[dest[s]] = true;
    const int row = perm->entry_of_slot[s] / k;
    for (int i = 0; i < hidden; ++i) {
      ASSERT_EQ(std::memcmp(&sent[static_cast<size_t>(dest[s]) * hidden + i],
                            &x_elems[static_cast<size_t>(row) * hidden + i], sizeof(T)),
                0)
          << "slot " << s << " element " << i;
    }
  }
  for (int p = 0; p < capacity; ++p) {
    if (used[p]) continue;
    EXPECT_TRUE(std::isnan(as_float(sent[static_cast<size_t>(p) * hidden]))) << "gap row " << p;
  }
  // The experts' outputs come back in the same layout (here: the sent rows scaled by
  // the slot's expert + 1 on the host), combined with random gate weights.
  std::vector<T> back(sent.size());
  std::vector<float> back_float(sent.size(), 0.0f);
  for (int s = 0; s < entries; ++s) {
    const int e = experts[perm->entry_of_slot[s]];
    for (int i = 0; i < hidden; ++i) {
      const size_t at = static_cast<size_t>(dest[s]) * hidden + i;
      const float v = as_float(sent[at]) * static_cast<float>(e + 1);
      if constexpr (std::is_same_v<T, float>) {
        back[at] = v;
      } else {
        back[at] = FloatToBf16(v);
      }
      back_float[at] = as_float(back[at]);
    }
  }
  std::vector<float> gates(entries);
  for (float& g : gates) g = static_cast<float>(rng() % 1000) / 997.0f;
  DeviceArray<T> dback(back);
  DeviceArray<float> dgates(gates);
  ASSERT_EQ(LaunchMoeCombineFrom(dback.get(), hidden, dslot.get(), ddest.get(), dgates.get(), rows,
                                 k, dout.get(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<T> out = dout.Download();
  ASSERT_EQ(out.size(), static_cast<size_t>(rows) * hidden);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < hidden; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < k; ++j) {
        const int slot = perm->slot_of_entry[r * k + j];
        acc = std::fma(gates[r * k + j], back_float[static_cast<size_t>(dest[slot]) * hidden + i],
                       acc);
      }
      const float want = std::is_same_v<T, float> ? acc : RoundToBf16(acc);
      EXPECT_EQ(as_float(out[static_cast<size_t>(r) * hidden + i]), want)
          << "row " << r << " element " << i;
    }
  }
}

TEST(MoeKernelsTest, ScatterAndCombineFromTheSendLayout) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  {
    SCOPED_TRACE("bf16");
    ScatterAndCombineFrom<Bf16>(rng);
  }
  {
    SCOPED_TRACE("f32");
    ScatterAndCombineFrom<float>(rng);
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels
