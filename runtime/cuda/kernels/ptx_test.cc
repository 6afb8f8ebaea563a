// ptx.h against its definitions (a GPU check; on the CPU execution layer the wrappers'
// host implementations): one warp's m16n8k16 bf16 MMA with f32 accumulation against a
// plain matrix product, ldmatrix x4 against the documented lane layout, and cp.async
// copies that land after their wait (on the layer, and only there, a missing wait leaves
// the destination as it was).
#include "runtime/cuda/kernels/ptx_test_kernels.h"

#include <cuda_runtime.h>  // cudaMalloc(T**)

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"

namespace lockstep::cuda::kernels {
namespace {

// A device copy of `host`, freed by the test (cudaFree).
template <typename T>
T* ToDevice(const std::vector<T>& host) {
  T* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return device;
}

template <typename T>
std::vector<T> ToHost(const T* device, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

uint16_t Bf16Bits(float exact) {
  uint32_t bits;
  std::memcpy(&bits, &exact, 4);
  return static_cast<uint16_t>(bits >> 16);
}

TEST(PtxTest, MmaM16N8K16MatchesAPlainProduct) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  constexpr uint64_t kSeed = 20261205;
  SCOPED_TRACE(::testing::Message() << "seed " << kSeed);
  std::mt19937_64 rng(kSeed);
  // Values exact in bf16 (quarters in [-2, 2]), so the products are exact in f32.
  auto value = [&] { return static_cast<float>(static_cast<int>(rng() % 17) - 8) / 4.0f; };
  std::vector<float> a(16 * 16), b(16 * 8), c(16 * 8);
  for (float& x : a) x = value();
  for (float& x : b) x = value();
  for (float& x : c) x = value() * 3.0f;
  std::vector<uint16_t> a_bits(a.size()), b_bits(b.size());
  for (size_t i = 0; i < a.size(); ++i) a_bits[i] = Bf16Bits(a[i]);
  for (size_t i = 0; i < b.size(); ++i) b_bits[i] = Bf16Bits(b[i]);
  uint16_t* da = ToDevice(a_bits);
  uint16_t* db = ToDevice(b_bits);
  float* dc = ToDevice(c);
  float* dd = ToDevice(std::vector<float>(16 * 8, NAN));
  ASSERT_EQ(LaunchPtxMma(da, db, dc, dd, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> d = ToHost(dd, 16 * 8);
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      double want = c[m * 8 + n];
      for (int k = 0; k < 16; ++k) want += static_cast<double>(a[m * 16 + k]) * b[k * 8 + n];
      // Quarter products: every partial sum is exact in f32, whatever the order.
      EXPECT_EQ(d[m * 8 + n], static_cast<float>(want)) << "D[" << m << "][" << n << "]";
    }
  }
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc),
                  static_cast<void*>(dd)}) {
    cudaFree(p);
  }
}

TEST(PtxTest, LdMatrixX4GivesEachLaneItsDocumentedElements) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  std::vector<uint16_t> tile(32 * 8);
  for (size_t i = 0; i < tile.size(); ++i) tile[i] = static_cast<uint16_t>(1000 + i);
  uint16_t* dt = ToDevice(tile);
  uint32_t* dout = ToDevice(std::vector<uint32_t>(32 * 4, 0));
  ASSERT_EQ(LaunchPtxLdMatrix(dt, dout, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint32_t> out = ToHost(dout, 32 * 4);
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      const int row = 8 * j + lane / 4;
      const int col = 2 * (lane % 4);
      const uint32_t want = tile[row * 8 + col] | (uint32_t{tile[row * 8 + col + 1]} << 16);
      EXPECT_EQ(out[lane * 4 + j], want) << "lane " << lane << " register " << j;
    }
  }
  cudaFree(dt);
  cudaFree(dout);
}

TEST(PtxTest, CpAsyncCopiesLandByTheirWait) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  std::vector<int4> in(64);
  for (int i = 0; i < 64; ++i) in[i] = int4{i, -i, 7 * i, 100 + i};
  int4* din = ToDevice(in);
  int4* dout = ToDevice(std::vector<int4>(64));
  ASSERT_EQ(LaunchPtxCpAsync(din, dout, -1, /*skip_wait=*/false, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int4> out = ToHost(dout, 64);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(std::memcmp(&out[i], &in[i], sizeof(int4)), 0) << "item " << i;
  }
#ifdef LOCKSTEP_CUDA_CPU
  // Without the wait nothing has landed yet on the layer (a GPU may have copied some).
  ASSERT_EQ(LaunchPtxCpAsync(din, dout, -1, /*skip_wait=*/true, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out = ToHost(dout, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i].x, -1) << "item " << i;
#endif
  cudaFree(din);
  cudaFree(dout);
}

}  // namespace
}  // namespace lockstep::cuda::kernels
