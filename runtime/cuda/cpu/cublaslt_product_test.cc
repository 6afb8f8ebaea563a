// The matmul arithmetic: bit for bit the plain k-ordered fma chain of every output
// element (so independent of the matrix sizes and of the instruction set), close to a
// double-precision product, and the epilogue's split-order sum, C handling and rounding.
#include "runtime/cuda/cpu/cublaslt_product.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/kernels/bf16.h"

namespace lockstep::cuda_cpu {
namespace {

using ::lockstep::cuda::kernels::Bf16;
using ::lockstep::cuda::kernels::Bf16ToFloat;
using ::lockstep::cuda::kernels::FloatToBf16;

constexpr uint64_t kSeed = 20261205;

// A column-major matrix of random values in [-1, 1) (bf16-representable for bf16).
struct TestMatrix {
  TestMatrix(std::mt19937_64& rng, ElementType type, int64_t rows, int64_t cols, int64_t ld)
      : type(type), rows(rows), cols(cols), ld(ld) {
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    f32.resize(ld * cols);
    bf16.resize(ld * cols);
    for (size_t i = 0; i < f32.size(); ++i) {
      bf16[i] = FloatToBf16(value(rng));
      f32[i] = type == ElementType::kBf16 ? Bf16ToFloat(bf16[i]) : value(rng);
    }
  }
  MatrixOperand Operand(bool transposed) const {
    return {type == ElementType::kF32 ? static_cast<const void*>(f32.data()) : bf16.data(), type,
            ld, transposed};
  }
  float At(int64_t r, int64_t c) const { return f32[r + c * ld]; }

  ElementType type;
  int64_t rows, cols, ld;
  std::vector<float> f32;  // the values (bf16 ones widened)
  std::vector<Bf16> bf16;
};

float OpAt(const TestMatrix& x, bool transposed, int64_t r, int64_t c) {
  return transposed ? x.At(c, r) : x.At(r, c);
}

// The definition: one std::fma chain per element, p ascending.
std::vector<float> NaiveChain(const TestMatrix& a, bool ta, const TestMatrix& b, bool tb, int64_t m,
                              int64_t n, int64_t k0, int64_t k1) {
  std::vector<float> acc(m * n, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float s = 0.0f;
      for (int64_t p = k0; p < k1; ++p) s = std::fma(OpAt(a, ta, i, p), OpAt(b, tb, p, j), s);
      acc[i + j * m] = s;
    }
  }
  return acc;
}

bool SameBits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

struct Case {
  int64_t m, n, k;
};

TEST(CublasLtProductTest, IsTheKOrderedFmaChainOfEveryElement) {
  SCOPED_TRACE(::testing::Message() << "seed " << kSeed);
  std::mt19937_64 rng(kSeed);
  for (const Case& c : {Case{1, 1, 1}, Case{7, 5, 3}, Case{17, 13, 255}, Case{33, 7, 257},
                        Case{130, 9, 600}, Case{16, 6, 256}, Case{200, 1, 70}}) {
    for (ElementType type : {ElementType::kBf16, ElementType::kF32}) {
      for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        SCOPED_TRACE(::testing::Message()
                     << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << ta << " tb=" << tb
                     << " bf16=" << (type == ElementType::kBf16));
        // Stored shapes (with a leading dimension 3 past the rows).
        const int64_t a_rows = ta ? c.k : c.m, a_cols = ta ? c.m : c.k;
        const int64_t b_rows = tb ? c.n : c.k, b_cols = tb ? c.k : c.n;
        const TestMatrix a(rng, type, a_rows, a_cols, a_rows + 3);
        const TestMatrix b(rng, type, b_rows, b_cols, b_rows + 3);
        std::vector<float> got(c.m * c.n, 0.0f);
        AccumulateProduct(a.Operand(ta), b.Operand(tb), c.m, c.n, 0, c.k, got.data());
        EXPECT_TRUE(SameBits(got, NaiveChain(a, ta, b, tb, c.m, c.n, 0, c.k)));
        std::vector<float> scalar(c.m * c.n, 0.0f);
        AccumulateProductScalar(a.Operand(ta), b.Operand(tb), c.m, c.n, 0, c.k, scalar.data());
        EXPECT_TRUE(SameBits(got, scalar));
      }
    }
  }
}

// A k range continues the chains already in `acc` (what a split computes).
TEST(CublasLtProductTest, KRangesContinueTheChain) {
  std::mt19937_64 rng(kSeed + 1);
  const int64_t m = 37, n = 11, k = 700;
  const TestMatrix a(rng, ElementType::kBf16, k, m, k);
  const TestMatrix b(rng, ElementType::kBf16, k, n, k);
  std::vector<float> whole(m * n, 0.0f), pieces(m * n, 0.0f);
  AccumulateProduct(a.Operand(true), b.Operand(false), m, n, 0, k, whole.data());
  for (int64_t p0 : {0, 100, 357}) {
    const int64_t p1 = p0 == 0 ? 100 : p0 == 100 ? 357 : k;
    AccumulateProduct(a.Operand(true), b.Operand(false), m, n, p0, p1, pieces.data());
  }
  EXPECT_TRUE(SameBits(whole, pieces));
  std::vector<float> second(m * n, 0.0f);
  AccumulateProduct(a.Operand(true), b.Operand(false), m, n, 300, k, second.data());
  EXPECT_TRUE(SameBits(second, NaiveChain(a, true, b, false, m, n, 300, k)));
}

// The batch-invariance contract: column 0 (one token) has the same bits alone as in a
// product of 300 columns, and row 5 the same in 6 rows as in 300.
TEST(CublasLtProductTest, AnElementDoesNotDependOnTheMatrixSizes) {
  std::mt19937_64 rng(kSeed + 2);
  const int64_t m = 300, n = 300, k = 1000;
  const TestMatrix w(rng, ElementType::kBf16, k, m, k);  // A, transposed: a weight [m, k]
  const TestMatrix x(rng, ElementType::kBf16, k, n, k);  // B: n activations of k
  std::vector<float> all(m * n, 0.0f), one(m, 0.0f), few(6 * n, 0.0f);
  AccumulateProduct(w.Operand(true), x.Operand(false), m, n, 0, k, all.data());
  AccumulateProduct(w.Operand(true), x.Operand(false), m, 1, 0, k, one.data());
  AccumulateProduct(w.Operand(true), x.Operand(false), 6, n, 0, k, few.data());
  EXPECT_EQ(std::memcmp(all.data(), one.data(), m * sizeof(float)), 0);
  for (int64_t j = 0; j < n; ++j) {
    ASSERT_EQ(std::memcmp(&all[5 + j * m], &few[5 + j * 6], sizeof(float)), 0) << "column " << j;
  }
}

TEST(CublasLtProductTest, IsCloseToADoublePrecisionProduct) {
  std::mt19937_64 rng(kSeed + 3);
  const int64_t m = 67, n = 19, k = 4099;
  const TestMatrix a(rng, ElementType::kF32, m, k, m);
  const TestMatrix b(rng, ElementType::kF32, k, n, k);
  std::vector<float> got(m * n, 0.0f);
  AccumulateProduct(a.Operand(false), b.Operand(false), m, n, 0, k, got.data());
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      double exact = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        exact += static_cast<double>(a.At(i, p)) * b.At(p, j);
        magnitude += std::abs(static_cast<double>(a.At(i, p)) * b.At(p, j));
      }
      // A chain of k roundings: |error| <= k * 2^-24 * sum |a b| (loosely).
      ASSERT_LE(std::abs(got[i + j * m] - exact), 1e-7 * k * magnitude + 1e-30)
          << "i=" << i << " j=" << j;
    }
  }
}

TEST(CublasLtProductTest, OutputSumsPartialsInOrderScalesAndRounds) {
  const int64_t m = 2, n = 2;
  // Three partials; 1 + 2^-30 - 1 is 0 in order ((1 + 2^-30) rounds to 1), 2^-30 otherwise.
  const float tiny = std::ldexp(1.0f, -30);
  std::vector<float> partials = {1.0f,  1.0f,  1.0f,  1.0f,  //
                                 tiny,  tiny,  tiny,  tiny,  //
                                 -1.0f, -1.0f, -1.0f, -1.0f};
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> d(m * n, 7.0f);
  WriteOutput(partials.data(), 3, m * n, m, n, 1.0f, 0.0f, {c.data(), ElementType::kF32, m, false},
              {d.data(), ElementType::kF32, m});
  for (float v : d) EXPECT_EQ(v, 0.0f);  // summed in order, NaN C not read
  // alpha scales, beta adds C.
  std::vector<float> one = {1.5f, 2.0f, -3.0f, 0.25f};
  std::vector<float> cv = {1.0f, 2.0f, 3.0f, 4.0f};
  WriteOutput(one.data(), 1, m * n, m, n, 2.0f, 0.5f, {cv.data(), ElementType::kF32, m, false},
              {d.data(), ElementType::kF32, m});
  EXPECT_EQ(d, (std::vector<float>{3.5f, 5.0f, -4.5f, 2.5f}));
  // To bf16, nearest even: 1 + 2^-8 is halfway (to 1), 1 + 3 * 2^-8 halfway (up).
  std::vector<float> halves = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8),
                               -1.0f - std::ldexp(1.0f, -8), 1.0f + std::ldexp(1.0f, -9)};
  std::vector<Bf16> out(4);
  WriteOutput(halves.data(), 1, m * n, m, n, 1.0f, 0.0f, {nullptr, ElementType::kBf16, m, false},
              {out.data(), ElementType::kBf16, m});
  EXPECT_EQ(Bf16ToFloat(out[0]), 1.0f);
  EXPECT_EQ(Bf16ToFloat(out[1]), 1.0f + 4 * std::ldexp(1.0f, -8));
  EXPECT_EQ(Bf16ToFloat(out[2]), -1.0f);
  EXPECT_EQ(Bf16ToFloat(out[3]), 1.0f);
}

// D may be C (in place) with its own leading dimension.
TEST(CublasLtProductTest, OutputInPlaceWithLeadingDimension) {
  const int64_t m = 2, n = 2, ld = 3;
  std::vector<float> acc = {1, 2, 3, 4};
  std::vector<Bf16> cd(ld * n, FloatToBf16(10.0f));
  cd[2] = FloatToBf16(std::numeric_limits<float>::quiet_NaN());  // padding, never touched
  WriteOutput(acc.data(), 1, m * n, m, n, 1.0f, 1.0f, {cd.data(), ElementType::kBf16, ld, false},
              {cd.data(), ElementType::kBf16, ld});
  EXPECT_EQ(Bf16ToFloat(cd[0]), 11.0f);
  EXPECT_EQ(Bf16ToFloat(cd[1]), 12.0f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(cd[2])));
  EXPECT_EQ(Bf16ToFloat(cd[3]), 13.0f);
  EXPECT_EQ(Bf16ToFloat(cd[4]), 14.0f);
}

}  // namespace
}  // namespace lockstep::cuda_cpu
