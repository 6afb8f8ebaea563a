#include "runtime/engine/cpu/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/sampler.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::CustomModelDir;
using ::lockstep::engine::testing::HostPool;
using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

std::unique_ptr<Transformer> Load(const std::string& dir) {
  auto model = Transformer::Load(dir, "target", ExpertGroup{});
  LOCKSTEP_CHECK_OK(model.status());
  return std::move(model).value();
}

std::vector<int32_t> RandomTokens(int n, std::mt19937_64& rng) {
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
  return tokens;
}

// One sequence of a forward: its tokens at [start, start + tokens.size()).
struct Piece {
  std::vector<BlockId>* blocks;
  int64_t start;
  std::vector<int32_t> tokens;
};

// Runs one forward over `pieces` and returns the logits of every row (copied).
std::vector<std::vector<float>> Forward(const Transformer& model, HostPool& pool,
                                        const std::vector<Piece>& pieces, ThreadPool* threads) {
  std::vector<ForwardRow> rows;
  std::vector<SequenceKv> seqs;
  std::vector<int32_t> logit_rows;
  for (const Piece& piece : pieces) {
    LOCKSTEP_CHECK_OK(pool.Cover(*piece.blocks, piece.start + piece.tokens.size()));
    const int32_t seq = static_cast<int32_t>(seqs.size());
    seqs.push_back(SequenceKv{absl::MakeConstSpan(*piece.blocks)});
    for (size_t j = 0; j < piece.tokens.size(); ++j) {
      logit_rows.push_back(static_cast<int32_t>(rows.size()));
      rows.push_back({piece.tokens[j], piece.start + static_cast<int64_t>(j), seq});
    }
  }
  Arena arena;
  absl::StatusOr<const float*> logits =
      model.Forward({rows, seqs, logit_rows}, pool.view(), arena, threads);
  LOCKSTEP_CHECK_OK(logits.status());
  const int vocab = model.config().vocab_size;
  std::vector<std::vector<float>> out;
  for (size_t r = 0; r < rows.size(); ++r) {
    out.emplace_back(*logits + r * vocab, *logits + (r + 1) * vocab);
  }
  return out;
}

// A plain double-precision forward of one sequence straight from the safetensors
// tensors (Hugging Face semantics), for the last position.
std::vector<double> ReferenceLogits(const std::string& dir, const std::vector<int32_t>& tokens) {
  const ModelConfig config = *LoadModelConfig(dir);
  auto tensors = std::move(SafetensorsModel::Open(dir)).value();
  auto read = [&](const std::string& name) {
    const TensorView* view = *tensors->Find(name);
    std::vector<float> f(view->NumElements());
    view->ToFloat(absl::MakeSpan(f));
    return std::vector<double>(f.begin(), f.end());
  };
  const int n = static_cast<int>(tokens.size());
  const int hidden = config.hidden_size;
  const int hd = config.head_dim;
  auto matvec = [](const std::vector<double>& w, const std::vector<double>& x, int rows) {
    std::vector<double> y(rows, 0.0);
    const size_t cols = x.size();
    for (int r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
    }
    return y;
  };
  auto rms = [&](std::vector<double> x, const std::vector<double>& w) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double scale = 1.0 / std::sqrt(ss / x.size() + config.rms_norm_eps);
    for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] * scale * w[i];
    return x;
  };
  auto rope = [&](double* v, int pos) {
    for (int i = 0; i < hd / 2; ++i) {
      const double angle = pos / std::pow(config.rope_theta, 2.0 * i / hd);
      const double x1 = v[i], x2 = v[i + hd / 2];
      v[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
      v[i + hd / 2] = x2 * std::cos(angle) + x1 * std::sin(angle);
    }
  };
  auto swiglu = [&](const std::vector<double>& x, const std::string& gate, const std::string& up,
                    const std::string& down, int width) {
    std::vector<double> g = matvec(read(gate), x, width), u = matvec(read(up), x, width);
    for (int i = 0; i < width; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return matvec(read(down), g, hidden);
  };
  const std::vector<double> embed = read(EmbeddingName());
  std::vector<std::vector<double>> h(n);
  for (int t = 0; t < n; ++t) {
    h[t].assign(embed.begin() + static_cast<size_t>(tokens[t]) * hidden,
                embed.begin() + static_cast<size_t>(tokens[t] + 1) * hidden);
  }
  for (int l = 0; l < config.num_layers; ++l) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      const std::vector<double> x = rms(h[t], read(LayerName(l, "input_layernorm.weight")));
      q[t] = matvec(read(AttentionName(l, "q_proj", "weight")), x, config.q_dim());
      k[t] = matvec(read(AttentionName(l, "k_proj", "weight")), x, config.kv_dim());
      v[t] = matvec(read(AttentionName(l, "v_proj", "weight")), x, config.kv_dim());
      if (config.attention_bias) {
        for (auto [vec, proj] :
             {std::pair{&q[t], "q_proj"}, {&k[t], "k_proj"}, {&v[t], "v_proj"}}) {
          const std::vector<double> bias = read(AttentionName(l, proj, "bias"));
          for (size_t i = 0; i < vec->size(); ++i) (*vec)[i] += bias[i];
        }
      }
      for (int hh = 0; hh < config.num_heads; ++hh) {
        if (config.qk_norm) {
          std::vector<double> head(q[t].begin() + hh * hd, q[t].begin() + (hh + 1) * hd);
          head = rms(head, read(LayerName(l, "self_attn.q_norm.weight")));
          std::copy(head.begin(), head.end(), q[t].begin() + hh * hd);
        }
        rope(&q[t][hh * hd], t);
      }
      for (int hh = 0; hh < config.num_kv_heads; ++hh) {
        if (config.qk_norm) {
          std::vector<double> head(k[t].begin() + hh * hd, k[t].begin() + (hh + 1) * hd);
          head = rms(head, read(LayerName(l, "self_attn.k_norm.weight")));
          std::copy(head.begin(), head.end(), k[t].begin() + hh * hd);
        }
        rope(&k[t][hh * hd], t);
      }
    }
    const int group = config.num_heads / config.num_kv_heads;
    for (int t = 0; t < n; ++t) {
      std::vector<double> attn(config.q_dim(), 0.0);
      for (int hh = 0; hh < config.num_heads; ++hh) {
        const int g = hh / group;
        std::vector<double> s(t + 1);
        double max_s = -1e300;
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[t][hh * hd + d] * k[j][g * hd + d];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
          max_s = std::max(max_s, s[j]);
        }
        double z = 0;
        for (double& x : s) z += (x = std::exp(x - max_s));
        for (int j = 0; j <= t; ++j) {
          for (int d = 0; d < hd; ++d) attn[hh * hd + d] += s[j] / z * v[j][g * hd + d];
        }
      }
      const std::vector<double> o =
          matvec(read(AttentionName(l, "o_proj", "weight")), attn, hidden);
      for (int i = 0; i < hidden; ++i) h[t][i] += o[i];
      const std::vector<double> x =
          rms(h[t], read(LayerName(l, "post_attention_layernorm.weight")));
      std::vector<double> mlp(hidden, 0.0);
      if (config.is_moe() && config.moe_layer[l]) {
        std::vector<double> logits = matvec(read(RouterName(config, l)), x, config.num_experts);
        double max_l = *std::max_element(logits.begin(), logits.end()), z = 0;
        for (double& p : logits) z += (p = std::exp(p - max_l));
        for (double& p : logits) p /= z;
        std::vector<int> order(config.num_experts);
        for (int e = 0; e < config.num_experts; ++e) order[e] = e;
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int b) { return logits[a] > logits[b]; });
        double sum = 0;
        for (int j = 0; j < config.num_experts_per_tok; ++j) sum += logits[order[j]];
        for (int j = 0; j < config.num_experts_per_tok; ++j) {
          const int e = order[j];
          const double weight = config.norm_topk_prob ? logits[e] / sum : logits[e];
          const std::vector<double> y =
              swiglu(x, ExpertName(config, l, e, ExpertPart::kGate),
                     ExpertName(config, l, e, ExpertPart::kUp),
                     ExpertName(config, l, e, ExpertPart::kDown), config.moe_intermediate_size);
          for (int i = 0; i < hidden; ++i) mlp[i] += weight * y[i];
        }
      } else {
        mlp = swiglu(x, DenseMlpName(l, ExpertPart::kGate), DenseMlpName(l, ExpertPart::kUp),
                     DenseMlpName(l, ExpertPart::kDown), config.intermediate_size);
      }
      for (int i = 0; i < hidden; ++i) h[t][i] += mlp[i];
    }
  }
  const std::vector<double> x = rms(h[n - 1], read(FinalNormName()));
  return matvec(read(config.tie_word_embeddings ? EmbeddingName() : LmHeadName()), x,
                config.vocab_size);
}

ModelConfig SmallConfig(const std::string& type) {
  ModelConfig config = *PresetConfig(type == "mixtral" ? "tiny-moe" : "tiny");
  config.model_type = type;
  config.hidden_size = 32;
  config.intermediate_size = 48;
  config.num_layers = 2;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 16;
  config.max_position = 256;
  if (type == "qwen2") config.attention_bias = true;
  if (type == "llama") config.tie_word_embeddings = true;
  if (type == "qwen3_moe") {
    config.qk_norm = true;
    config.num_experts = 4;
    config.num_experts_per_tok = 2;
    config.moe_intermediate_size = 24;
    config.norm_topk_prob = false;
    config.moe_naming = MoeNaming::kQwen;
    config.moe_layer = {true, false};  // layer 1 dense (mlp_only_layers)
  }
  if (type == "mixtral") {
    config.moe_intermediate_size = 48;
    config.moe_layer = {true, true};
  }
  return config;
}

// The engine's forward equals a plain double-precision implementation of the Hugging
// Face architectures (RoPE convention, GQA, biases, q/k norm, routing, tied head).
TEST(TransformerTest, MatchesDoublePrecisionReference) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const char* type : {"llama", "qwen2", "mixtral", "qwen3_moe"}) {
    SCOPED_TRACE(type);
    const std::string dir = CustomModelDir(SmallConfig(type), type);
    const std::unique_ptr<Transformer> model = Load(dir);
    HostPool pool(model->Layout(4), 64, seed);
    std::vector<BlockId> blocks;
    const std::vector<int32_t> tokens = RandomTokens(19, rng);
    const std::vector<std::vector<float>> logits =
        Forward(*model, pool, {{&blocks, 0, tokens}}, nullptr);
    const std::vector<double> reference = ReferenceLogits(dir, tokens);
    double max_error = 0, max_value = 0;
    for (size_t v = 0; v < reference.size(); ++v) {
      max_error = std::max(max_error, std::fabs(logits.back()[v] - reference[v]));
      max_value = std::max(max_value, std::fabs(reference[v]));
    }
    EXPECT_LT(max_error, 1e-4 * std::max(1.0, max_value)) << "max |logit| " << max_value;
  }
}

TEST(TransformerTest, ChunkedPrefillEqualsOneShotBitwise) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const char* preset : {"tiny", "tiny-moe"}) {
    const std::unique_ptr<Transformer> model = Load(PresetModelDir(preset));
    const std::vector<int32_t> prompt = RandomTokens(61, rng);
    HostPool pool(model->Layout(8), 64, seed);
    std::vector<BlockId> one_shot;
    const std::vector<float> expected =
        Forward(*model, pool, {{&one_shot, 0, prompt}}, nullptr).back();
    for (const std::vector<int>& splits : {std::vector<int>{1, 60}, {7, 13, 41}, {32, 29}}) {
      std::vector<BlockId> chunked;
      std::vector<float> last;
      int64_t position = 0;
      for (int size : splits) {
        std::vector<int32_t> chunk(prompt.begin() + position, prompt.begin() + position + size);
        last = Forward(*model, pool, {{&chunked, position, chunk}}, nullptr).back();
        position += size;
      }
      ASSERT_EQ(last, expected) << preset << " split starting " << splits[0];
      // And greedy decoding from both caches stays identical.
      int32_t a = ArgMax(expected.data(), model->config().vocab_size),
              b = ArgMax(last.data(), model->config().vocab_size);
      for (int step = 0; step < 5; ++step) {
        ASSERT_EQ(a, b);
        const int64_t pos = static_cast<int64_t>(prompt.size()) + step;
        a = ArgMax(Forward(*model, pool, {{&one_shot, pos, {a}}}, nullptr).back().data(),
                   model->config().vocab_size);
        b = ArgMax(Forward(*model, pool, {{&chunked, pos, {b}}}, nullptr).back().data(),
                   model->config().vocab_size);
      }
      for (BlockId block : chunked) pool.Free(block);
    }
  }
}

// A sequence's logits are bitwise the same alone, batched with other sequences (at
// other positions, chunk or single-token rows), and with more threads.
TEST(TransformerTest, LogitsAreBatchInvariant) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  ThreadPool three(3);
  for (const char* preset : {"tiny", "tiny-moe"}) {
    const std::unique_ptr<Transformer> model = Load(PresetModelDir(preset));
    HostPool pool(model->Layout(16), 256, seed);
    const std::vector<int32_t> probe = RandomTokens(23, rng);
    std::vector<BlockId> alone_blocks;
    const std::vector<std::vector<float>> alone =
        Forward(*model, pool, {{&alone_blocks, 0, probe}}, nullptr);
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<std::vector<BlockId>> others(1 + trial);
      std::vector<Piece> pieces;
      for (auto& blocks : others) {
        const int len = 1 + static_cast<int>(rng() % 40);
        pieces.push_back({&blocks, 0, RandomTokens(len, rng)});
      }
      std::vector<BlockId> probe_blocks;
      const size_t at = rng() % (pieces.size() + 1);
      pieces.insert(pieces.begin() + at, Piece{&probe_blocks, 0, probe});
      const auto logits = Forward(*model, pool, pieces, trial % 2 == 0 ? &three : nullptr);
      size_t first = 0;
      for (size_t p = 0; p < at; ++p) first += pieces[p].tokens.size();
      for (size_t j = 0; j < probe.size(); ++j) {
        ASSERT_EQ(logits[first + j], alone[j]) << preset << " trial " << trial << " row " << j;
      }
      for (auto& blocks : others) {
        for (BlockId b : blocks) pool.Free(b);
      }
      for (BlockId b : probe_blocks) pool.Free(b);
    }
  }
}

// Once the arena has grown to a batch shape, forwards of that shape allocate nothing.
TEST(TransformerTest, SteadyStateForwardsDoNotAllocate) {
  const std::unique_ptr<Transformer> model = Load(PresetModelDir("tiny-moe"));
  HostPool pool(model->Layout(16), 64, 1);
  std::vector<BlockId> blocks;
  LOCKSTEP_CHECK_OK(pool.Cover(blocks, 64));
  const std::vector<SequenceKv> seqs = {SequenceKv{absl::MakeConstSpan(blocks)}};
  Arena arena;
  int64_t allocations = -1;
  for (int step = 0; step < 20; ++step) {
    const std::vector<ForwardRow> rows = {{static_cast<int32_t>(step), step, 0}};
    const std::vector<int32_t> logit_rows = {0};
    arena.Reset();
    ASSERT_THAT(model->Forward({rows, seqs, logit_rows}, pool.view(), arena, nullptr), IsOk());
    if (step == 2) allocations = arena.num_heap_allocations();
    if (step > 2) {
      EXPECT_EQ(arena.num_heap_allocations(), allocations) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace lockstep::engine
