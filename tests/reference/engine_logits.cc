// The CPU engine's side of the DeepSeek-V3 reference comparison (compare_deepseek.py):
//
//   engine_logits write CONFIG_JSON DIR SEED   writes a seeded model of that config.json
//                                              (make-model's WriteModel, f32 storage)
//   engine_logits run DIR TOKENS STEPS OUT     prefills TOKENS (comma-separated) in one
//                                              forward, then decodes STEPS greedy tokens
//                                              one forward each over the latent cache
//
// `run` writes OUT: int32 rows, int32 vocab, the rows' tokens (int32: the prompt, then
// the generated ones but the last), then the f32 logits of every row.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {
namespace {

absl::Status Write(const std::string& config_path, const std::string& dir, uint64_t seed) {
  absl::StatusOr<std::string> text = ReadFileToString(config_path);
  if (!text.ok()) return text.status();
  absl::StatusOr<ModelConfig> config = ParseModelConfig(*text, config_path);
  if (!config.ok()) return config.status();
  return WriteModel(*config, dir, seed, DType::kF32);
}

absl::Status Run(const std::string& dir, const std::string& token_list, int steps,
                 const std::string& out_path) {
  absl::StatusOr<std::unique_ptr<Transformer>> loaded =
      Transformer::Load(dir, "target", ExpertGroup{});
  if (!loaded.ok()) return loaded.status();
  const std::unique_ptr<Transformer> model = std::move(loaded).value();
  std::vector<int32_t> tokens;
  for (absl::string_view piece : absl::StrSplit(token_list, ',')) {
    int32_t t = 0;
    if (!absl::SimpleAtoi(piece, &t)) return absl::InvalidArgumentError("bad token list");
    tokens.push_back(t);
  }
  const int total = static_cast<int>(tokens.size()) + steps;
  constexpr int kTokensPerBlock = 4;
  const kv::BlockLayout layout = model->Layout(kTokensPerBlock);
  const int num_blocks = total / kTokensPerBlock + 1;
  std::vector<float> storage(layout.BlockElements() * num_blocks);
  const KvPoolView pool{storage.data(), layout, num_blocks};
  // Blocks in reverse order: a scattered block table.
  std::vector<BlockId> blocks(num_blocks);
  for (int b = 0; b < num_blocks; ++b) blocks[b] = BlockId(num_blocks - 1 - b);
  const std::vector<SequenceKv> seqs = {SequenceKv{absl::MakeConstSpan(blocks)}};
  const int vocab = model->config().vocab_size;
  std::vector<int32_t> row_tokens;
  std::vector<float> logits;
  auto forward = [&](int64_t start, const std::vector<int32_t>& chunk) -> absl::Status {
    std::vector<ForwardRow> rows;
    std::vector<int32_t> logit_rows;
    for (size_t j = 0; j < chunk.size(); ++j) {
      rows.push_back({chunk[j], start + static_cast<int64_t>(j), 0});
      logit_rows.push_back(static_cast<int32_t>(j));
      row_tokens.push_back(chunk[j]);
    }
    Arena arena;
    absl::StatusOr<const float*> out =
        model->Forward({rows, seqs, logit_rows}, pool, arena, nullptr);
    if (!out.ok()) return out.status();
    logits.insert(logits.end(), *out, *out + chunk.size() * vocab);
    return absl::OkStatus();
  };
  if (absl::Status s = forward(0, tokens); !s.ok()) return s;
  for (int s = 0; s + 1 < steps; ++s) {
    const float* last = logits.data() + logits.size() - vocab;
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    if (absl::Status s = forward(static_cast<int64_t>(row_tokens.size()), {next}); !s.ok()) {
      return s;
    }
  }
  std::ofstream out(out_path, std::ios::binary);
  const int32_t header[2] = {static_cast<int32_t>(row_tokens.size()), vocab};
  out.write(reinterpret_cast<const char*>(header), sizeof(header));
  out.write(reinterpret_cast<const char*>(row_tokens.data()), row_tokens.size() * sizeof(int32_t));
  out.write(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float));
  if (!out) return absl::InternalError("cannot write " + out_path);
  return absl::OkStatus();
}

}  // namespace
}  // namespace lockstep::engine

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::Status status = absl::InvalidArgumentError(
      "usage: engine_logits write CONFIG_JSON DIR SEED | run DIR TOKENS STEPS OUT");
  uint64_t seed = 0;
  int steps = 0;
  if (args.size() == 4 && args[0] == "write" && absl::SimpleAtoi(args[3], &seed)) {
    status = lockstep::engine::Write(args[1], args[2], seed);
  } else if (args.size() == 5 && args[0] == "run" && absl::SimpleAtoi(args[3], &steps)) {
    status = lockstep::engine::Run(args[1], args[2], steps, args[4]);
  }
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  return 0;
}
