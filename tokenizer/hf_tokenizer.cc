#include "tokenizer/hf_tokenizer.h"

#include <fstream>
#include <sstream>

#include "common/status_macros.h"
#include "fmt/format.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

absl::Status InSource(std::string_view source, const absl::Status& status) {
  return absl::Status(status.code(),
                      fmt::format("tokenizer file {}: {}", source, std::string(status.message())));
}

const nlohmann::json& FieldOrNull(const nlohmann::json& doc, const char* key) {
  static const nlohmann::json kNull;
  const auto it = doc.find(key);
  return it == doc.end() ? kNull : *it;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromJson(std::string_view json,
                                                                   std::string_view source) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InSource(source, absl::InvalidArgumentError("not a JSON object"));
  }
  const nlohmann::json& model = FieldOrNull(doc, "model");
  if (!model.is_object()) return InSource(source, absl::InvalidArgumentError("no 'model'"));
  const auto type_field = model.find("type");
  const std::string type = type_field == model.end() ? (model.contains("merges") ? "BPE" : "")
                           : type_field->is_string() ? type_field->get<std::string>()
                                                     : type_field->dump();
  if (type != "BPE") {
    return InSource(source, absl::UnimplementedError(
                                fmt::format("model type '{}' is not supported (only BPE)", type)));
  }
  auto normalizer = Normalizer::FromJson(FieldOrNull(doc, "normalizer"));
  if (!normalizer.ok()) return InSource(source, normalizer.status());
  auto pre_tokenizer = PreTokenizer::FromJson(FieldOrNull(doc, "pre_tokenizer"));
  if (!pre_tokenizer.ok()) return InSource(source, pre_tokenizer.status());
  auto bpe = BpeModel::FromJson(model, pre_tokenizer->byte_level());
  if (!bpe.ok()) return InSource(source, bpe.status());
  auto added = AddedVocabulary::FromJson(FieldOrNull(doc, "added_tokens"), *normalizer);
  if (!added.ok()) return InSource(source, added.status());
  auto post_processor = PostProcessor::FromJson(FieldOrNull(doc, "post_processor"));
  if (!post_processor.ok()) return InSource(source, post_processor.status());
  auto decoder = Decoder::FromJson(FieldOrNull(doc, "decoder"));
  if (!decoder.ok()) return InSource(source, decoder.status());
  auto tokenizer = std::unique_ptr<HfTokenizer>(
      new HfTokenizer(*std::move(normalizer), *std::move(pre_tokenizer), *std::move(bpe),
                      *std::move(added), *std::move(post_processor), *std::move(decoder)));
  if (absl::Status ids = tokenizer->post_processor_.CheckIds(tokenizer->vocab_size()); !ids.ok()) {
    return InSource(source, ids);
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::LoadFromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot read tokenizer file {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  return FromJson(text.str(), path);
}

std::vector<int32_t> HfTokenizer::Encode(std::string_view input, bool add_special_tokens) const {
  std::string valid;
  std::string_view text = input;
  if (!IsValidUtf8(input)) {
    valid = ToValidUtf8(input);
    text = valid;
  }
  std::vector<int32_t> ids;
  std::vector<AddedVocabulary::Piece> pieces;
  added_.Split(text, /*normalized_tokens=*/false, &pieces);
  for (const AddedVocabulary::Piece& piece : pieces) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
    } else {
      EncodePiece(piece.text, piece.text.data() == text.data(), &ids);
    }
  }
  if (add_special_tokens) post_processor_.AddSpecialTokens(&ids);
  return ids;
}

void HfTokenizer::EncodePiece(std::string_view piece, bool at_input_start,
                              std::vector<int32_t>* ids) const {
  std::string normalized;
  if (!normalizer_.empty()) {
    normalized = normalizer_.Normalize(piece);
    piece = normalized;
  }
  std::vector<AddedVocabulary::Piece> pieces;
  added_.Split(piece, /*normalized_tokens=*/true, &pieces);
  thread_local Words words;
  for (const AddedVocabulary::Piece& sub : pieces) {
    if (sub.id >= 0) {
      ids->push_back(sub.id);
      continue;
    }
    pre_tokenizer_.Split(sub.text, at_input_start && sub.text.data() == piece.data(), &words);
    for (size_t w = 0; w < words.ranges.size(); ++w) model_->Tokenize(words.word(w), ids);
  }
}

std::string HfTokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const {
  DecodeStream stream = NewDecodeStream(skip_special_tokens);
  std::string text;
  for (const int32_t id : ids) text += stream.Push(id);
  text += stream.Flush();
  return text;
}

std::optional<int32_t> HfTokenizer::TokenToId(std::string_view token) const {
  if (const auto id = added_.FindByContent(token)) return id;
  return model_->TokenToId(token);
}

const std::string* HfTokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* added = added_.FindById(id)) return &added->content;
  return model_->IdToToken(id);
}

bool HfTokenizer::IsSpecial(int32_t id) const {
  const AddedToken* added = added_.FindById(id);
  return added != nullptr && added->special;
}

int32_t HfTokenizer::vocab_size() const {
  int32_t size = model_->size();
  for (const AddedToken& token : added_.tokens()) size = std::max(size, token.id + 1);
  return size;
}

}  // namespace lockstep::tok
