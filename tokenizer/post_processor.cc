#include "tokenizer/post_processor.h"

#include "common/status_macros.h"
#include "fmt/format.h"
#include "tokenizer/json_fields.h"

namespace lockstep::tok {

absl::StatusOr<PostProcessor> PostProcessor::FromJson(const nlohmann::json& config) {
  PostProcessor processor;
  if (!config.is_null()) RETURN_IF_ERROR(processor.AddConfig(config));
  return processor;
}

absl::Status PostProcessor::AddConfig(const nlohmann::json& config) {
  ASSIGN_OR_RETURN(const std::string type, TypeOf(config, "post_processor"));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    const auto it = config.find("processors");
    if (it == config.end() || !it->is_array()) {
      return absl::InvalidArgumentError("post_processor Sequence: 'processors' must be an array");
    }
    for (const nlohmann::json& child : *it) RETURN_IF_ERROR(AddConfig(child));
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") return UnsupportedType("post_processor", type);
  const auto single = config.find("single");
  const auto specials = config.find("special_tokens");
  if (single == config.end() || !single->is_array() || specials == config.end() ||
      !specials->is_object()) {
    return absl::InvalidArgumentError(
        "post_processor TemplateProcessing: needs 'single' and 'special_tokens'");
  }
  Template t;
  bool seen_sequence = false;
  for (const nlohmann::json& piece : *single) {
    if (piece.contains("Sequence")) {
      const absl::StatusOr<std::string> id = StringField(piece["Sequence"], "id", "Sequence");
      if (seen_sequence || !id.ok() || *id != "A") {
        return absl::InvalidArgumentError(
            "post_processor TemplateProcessing: 'single' must hold sequence A once");
      }
      seen_sequence = true;
      continue;
    }
    const auto special = piece.find("SpecialToken");
    if (special == piece.end() || !special->is_object()) {
      return absl::InvalidArgumentError(
          fmt::format("post_processor TemplateProcessing: bad piece {}", piece.dump()));
    }
    ASSIGN_OR_RETURN(const std::string name,
                     StringField(*special, "id", "post_processor TemplateProcessing"));
    const auto entry = specials->find(name);
    if (entry == specials->end() || !entry->contains("ids") || !(*entry)["ids"].is_array()) {
      return absl::InvalidArgumentError(
          fmt::format("post_processor TemplateProcessing: special token '{}' has no ids", name));
    }
    for (const nlohmann::json& id : (*entry)["ids"]) {
      if (!id.is_number_integer()) {
        return absl::InvalidArgumentError(fmt::format(
            "post_processor TemplateProcessing: special token '{}' has a bad id", name));
      }
      (seen_sequence ? t.after : t.before).push_back(id.get<int32_t>());
    }
  }
  if (!seen_sequence) {
    return absl::InvalidArgumentError(
        "post_processor TemplateProcessing: 'single' must hold sequence A");
  }
  templates_.push_back(std::move(t));
  return absl::OkStatus();
}

absl::Status PostProcessor::CheckIds(int32_t vocab_size) const {
  for (const Template& t : templates_) {
    for (const std::vector<int32_t>* ids : {&t.before, &t.after}) {
      for (const int32_t id : *ids) {
        if (id < 0 || id >= vocab_size) {
          return absl::InvalidArgumentError(fmt::format(
              "post_processor TemplateProcessing: special token id {} is outside the "
              "vocabulary (ids 0..{})",
              id, vocab_size - 1));
        }
      }
    }
  }
  return absl::OkStatus();
}

void PostProcessor::AddSpecialTokens(std::vector<int32_t>* ids) const {
  for (const Template& t : templates_) {
    ids->insert(ids->begin(), t.before.begin(), t.before.end());
    ids->insert(ids->end(), t.after.begin(), t.after.end());
  }
}

}  // namespace lockstep::tok
