#include "tokenizer/byte_tokenizer.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "tokenizer/utf8_stream_decoder.h"

namespace lockstep::tok {
namespace {

absl::Status FileError(std::string_view source, std::string_view message) {
  return absl::InvalidArgumentError(fmt::format("tokenizer file {}: {}", source, message));
}

}  // namespace

absl::StatusOr<ByteTokenizer> ByteTokenizer::Create(int32_t vocab_size, int32_t bos_token_id,
                                                    int32_t eos_token_id) {
  if (vocab_size < 258) {
    return absl::InvalidArgumentError(
        fmt::format("vocab_size must be >= 258 (256 bytes + BOS + EOS), got {}", vocab_size));
  }
  for (auto [name, id] :
       {std::pair{"bos_token_id", bos_token_id}, {"eos_token_id", eos_token_id}}) {
    if (id < 256 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          fmt::format("{} must be in [256, vocab_size={}), got {}", name, vocab_size, id));
    }
  }
  if (bos_token_id == eos_token_id) {
    return absl::InvalidArgumentError(
        fmt::format("bos_token_id and eos_token_id must differ, both are {}", bos_token_id));
  }
  return ByteTokenizer(vocab_size, bos_token_id, eos_token_id);
}

absl::StatusOr<ByteTokenizer> ByteTokenizer::FromJson(std::string_view json,
                                                      std::string_view source) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return FileError(source, "not valid JSON");
  if (!doc.is_object()) return FileError(source, "must be a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "type" && key != "vocab_size" && key != "bos_token_id" && key != "eos_token_id") {
      return FileError(source, fmt::format("unknown key '{}'", key));
    }
  }
  const auto type = doc.find("type");
  if (type == doc.end() || !type->is_string()) {
    return FileError(source, "'type' must be the string \"byte_level\"");
  }
  if (type->get<std::string>() != "byte_level") {
    return FileError(
        source, fmt::format("'type' must be \"byte_level\", got \"{}\"", type->get<std::string>()));
  }
  int32_t values[3] = {0, 0, 0};
  const char* keys[3] = {"vocab_size", "bos_token_id", "eos_token_id"};
  for (int i = 0; i < 3; ++i) {
    const auto it = doc.find(keys[i]);
    if (it == doc.end()) return FileError(source, fmt::format("'{}' is missing", keys[i]));
    if (!it->is_number_integer() || it->get<int64_t>() < INT32_MIN ||
        it->get<int64_t>() > INT32_MAX) {
      return FileError(source, fmt::format("'{}' must be an integer, got {}", keys[i], it->dump()));
    }
    values[i] = static_cast<int32_t>(it->get<int64_t>());
  }
  absl::StatusOr<ByteTokenizer> tokenizer = Create(values[0], values[1], values[2]);
  if (!tokenizer.ok()) return FileError(source, std::string(tokenizer.status().message()));
  return tokenizer;
}

absl::StatusOr<ByteTokenizer> ByteTokenizer::LoadFromModelDir(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / kTokenizerFileName).string();
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(fmt::format("cannot read tokenizer file {}", path));
  }
  std::stringstream text;
  text << file.rdbuf();
  return FromJson(text.str(), path);
}

std::vector<int32_t> ByteTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

std::string ByteTokenizer::TokenBytes(absl::Span<const int32_t> ids) const {
  std::string bytes;
  bytes.reserve(ids.size());
  for (int32_t id : ids) {
    if (IsByteToken(id)) bytes.push_back(static_cast<char>(id));
  }
  return bytes;
}

std::string ByteTokenizer::Decode(absl::Span<const int32_t> ids) const {
  Utf8StreamDecoder decoder;
  std::string text = decoder.Push(TokenBytes(ids));
  text += decoder.Flush();
  return text;
}

}  // namespace lockstep::tok
