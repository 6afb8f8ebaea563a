#include "grammar/model_vocabulary.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"

namespace lockstep::grammar {

absl::StatusOr<std::shared_ptr<const Vocabulary>> LoadModelVocabulary(const std::string& model_dir,
                                                                      int32_t vocab_size,
                                                                      int32_t eos_token_id) {
  auto vocabulary = std::make_shared<Vocabulary>();
  std::vector<std::string>& bytes = vocabulary->token_bytes;
  const std::string hf_path = model_dir + "/tokenizer.json";
  int32_t tokenizer_size = 0;
  if (std::filesystem::exists(hf_path)) {
    absl::StatusOr<std::unique_ptr<tok::HfTokenizer>> loaded =
        tok::HfTokenizer::LoadFromFile(hf_path);
    if (!loaded.ok()) return loaded.status();
    const std::unique_ptr<tok::HfTokenizer>& hf = *loaded;
    tokenizer_size = hf->vocab_size();
    if (tokenizer_size <= vocab_size) {
      bytes.resize(vocab_size);
      for (int32_t id = 0; id < tokenizer_size; ++id) {
        if (hf->IsSpecial(id)) continue;
        const std::string* token = hf->IdToToken(id);
        if (token != nullptr) hf->decoder().AppendTokenBytes(*token, /*index=*/1, &bytes[id]);
      }
    }
  } else {
    absl::StatusOr<tok::ByteTokenizer> loaded = tok::ByteTokenizer::LoadFromModelDir(model_dir);
    if (!loaded.ok()) return loaded.status();
    const tok::ByteTokenizer& byte = *loaded;
    tokenizer_size = byte.vocab_size();
    if (tokenizer_size <= vocab_size) {
      bytes.resize(vocab_size);
      for (int32_t id = 0; id < 256 && id < vocab_size; ++id) bytes[id] = byte.TokenBytes({id});
    }
  }
  if (tokenizer_size > vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(model_dir, ": the tokenizer has ",
                                                   tokenizer_size, " ids, the model only ",
                                                   vocab_size));
  }
  if (eos_token_id >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(model_dir, ": EOS ", eos_token_id,
                                                   " is outside the vocabulary of ", vocab_size));
  }
  if (eos_token_id >= 0) {
    bytes[eos_token_id].clear();
    vocabulary->stop_tokens.push_back(eos_token_id);
  }
  return std::shared_ptr<const Vocabulary>(std::move(vocabulary));
}

}  // namespace lockstep::grammar
