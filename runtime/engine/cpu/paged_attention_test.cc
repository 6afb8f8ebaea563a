#include "runtime/engine/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

// Dense causal attention in double for one query over keys [0, position].
std::vector<double> DenseAttention(const std::vector<float>& q,
                                   const std::vector<std::vector<float>>& k,
                                   const std::vector<std::vector<float>>& v, int64_t position,
                                   int num_heads, int kv_heads, int head_dim) {
  std::vector<double> out(static_cast<size_t>(num_heads) * head_dim, 0.0);
  const int group = num_heads / kv_heads;
  for (int h = 0; h < num_heads; ++h) {
    const int g = h / group;
    std::vector<double> s(position + 1);
    double max_s = -1e300;
    for (int64_t j = 0; j <= position; ++j) {
      double dot = 0;
      for (int d = 0; d < head_dim; ++d)
        dot += double{q[h * head_dim + d]} * k[j][g * head_dim + d];
      s[j] = dot / std::sqrt(static_cast<double>(head_dim));
      max_s = std::max(max_s, s[j]);
    }
    double z = 0;
    for (double& x : s) z += (x = std::exp(x - max_s));
    for (int64_t j = 0; j <= position; ++j) {
      for (int d = 0; d < head_dim; ++d) out[h * head_dim + d] += s[j] / z * v[j][g * head_dim + d];
    }
  }
  return out;
}

// Writes a sequence's K/V chunk by chunk into a scattered block table (random block
// size, random split into chunks, the tail optionally in a spec buffer), then checks
// every position's attention against the dense reference.
TEST(PagedAttentionTest, EqualsDenseReference) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 40; ++trial) {
    const int tokens_per_block = 1 + static_cast<int>(rng() % 17);
    const int kv_heads = 1 + static_cast<int>(rng() % 3);
    const int num_heads = kv_heads * (1 + static_cast<int>(rng() % 3));
    const int head_dim = 2 * (1 + static_cast<int>(rng() % 12));
    const int layers = 1 + static_cast<int>(rng() % 3);
    const int layer = static_cast<int>(rng() % layers);
    const int64_t length = 1 + static_cast<int64_t>(rng() % 90);
    const int spec_tokens = static_cast<int>(rng() % 4);  // tail kept in a spec buffer
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " tpb " << tokens_per_block
                                      << " heads " << num_heads << "/" << kv_heads << " hd "
                                      << head_dim << " len " << length << " spec " << spec_tokens);
    const kv::BlockLayout layout{layers, kv_heads, head_dim, tokens_per_block};
    const int num_blocks = static_cast<int>(layout.BlocksFor(length)) * 2 + 3;
    std::vector<float> storage(num_blocks * layout.BlockElements(), std::nanf(""));
    std::vector<BlockId> blocks;
    std::vector<int> ids(num_blocks);
    for (int i = 0; i < num_blocks; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int64_t b = 0; b < layout.BlocksFor(length); ++b) blocks.push_back(BlockId(ids[b]));
    std::vector<float> spec(SpecBufferFloats(layout, std::max(spec_tokens, 1)), std::nanf(""));
    const int64_t spec_base = length - std::min<int64_t>(spec_tokens, length);
    const KvPoolView pool{storage.data(), layout, num_blocks};
    SequenceKv seq{blocks, spec_tokens > 0 ? spec_base : std::numeric_limits<int64_t>::max(),
                   spec.data(), std::max(spec_tokens, 1)};

    std::vector<std::vector<float>> k(length), v(length), q(length);
    for (int64_t p = 0; p < length; ++p) {
      for (auto* vec : {&k[p], &v[p]}) {
        vec->resize(kv_heads * head_dim);
        for (float& x : *vec) x = normal(rng);
      }
      q[p].resize(num_heads * head_dim);
      for (float& x : q[p]) x = normal(rng);
    }
    // Write in random chunks; attend each chunk's rows after writing it.
    int64_t position = 0;
    std::vector<float> scores((length + 1) * (num_heads / kv_heads)), out(num_heads * head_dim);
    while (position < length) {
      const int64_t chunk =
          std::min<int64_t>(length - position, 1 + static_cast<int64_t>(rng() % 20));
      for (int64_t p = position; p < position + chunk; ++p) {
        WriteKv(pool, seq, layer, p, k[p].data(), v[p].data());
      }
      for (int64_t p = position; p < position + chunk; ++p) {
        AttendRow(pool, seq, layer, q[p].data(), p, num_heads,
                  1.0f / std::sqrt(static_cast<float>(head_dim)), scores.data(), out.data());
        const std::vector<double> expected =
            DenseAttention(q[p], k, v, p, num_heads, kv_heads, head_dim);
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_LE(std::fabs(out[i] - expected[i]), 1e-5 * std::max(1.0, std::fabs(expected[i])))
              << "position " << p << " element " << i;
        }
      }
      position += chunk;
    }
    // Nothing outside this sequence's slots was written.
    size_t written = 0;
    for (float x : storage) written += std::isnan(x) ? 0 : 1;
    const int64_t in_pool = std::min(length, spec_tokens > 0 ? spec_base : length);
    EXPECT_EQ(written, static_cast<size_t>(in_pool) * 2 * kv_heads * head_dim);
  }
}

}  // namespace
}  // namespace lockstep::engine
