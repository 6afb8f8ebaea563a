#include "runtime/router/http/openai_grammar.h"

#include <utility>

#include "fmt/format.h"
#include "grammar/matcher.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/http/request_fields.h"

namespace lockstep::router {
namespace {

using json = nlohmann::ordered_json;

// `spec` if it compiles, else INVALID_ARGUMENT for `field` naming the problem.
absl::StatusOr<grammar::GrammarSpec> Checked(grammar::GrammarSpec spec, const char* field,
                                             const char* what) {
  const absl::Status status = grammar::CheckGrammarSpec(spec);
  if (!status.ok()) {
    return InvalidParam(
        field, fmt::format("{} does not compile: {}", what, std::string(status.message())));
  }
  return spec;
}

// Rewrites every local "$ref" ("#..." ) in `schema` to point below `pointer` (a JSON
// pointer, "/anyOf/0/properties/arguments"), where the schema is placed in a larger
// one. Other references are left for the compiler to refuse.
void RebaseRefs(json& schema, const std::string& pointer) {
  if (schema.is_array()) {
    for (json& item : schema) RebaseRefs(item, pointer);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key == "$ref" && value.is_string()) {
      const std::string ref = value.get<std::string>();
      if (!ref.empty() && ref[0] == '#') value = "#" + pointer + ref.substr(1);
    } else if (key != "const" && key != "enum" && key != "default" && key != "examples") {
      RebaseRefs(value, pointer);
    }
  }
}

}  // namespace

absl::StatusOr<std::optional<grammar::GrammarSpec>> ResponseFormatGrammar(const json& body) {
  const auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return std::nullopt;
  const json& format = *it;
  const auto type = format.is_object() ? format.find("type") : format.end();
  if (type == format.end() || !type->is_string()) {
    return InvalidParam("response_format",
                        fmt::format("response_format must be an object with a \"type\" of "
                                    "\"text\", \"json_object\" or \"json_schema\", got {}",
                                    JsonPreview(format)));
  }
  const std::string& kind = type->get_ref<const std::string&>();
  if (kind == "text") return std::nullopt;
  if (kind == "json_object") {
    return grammar::GrammarSpec{grammar::GrammarSpec::Kind::kJsonObject, ""};
  }
  if (kind != "json_schema") {
    return InvalidParam("response_format",
                        fmt::format("response_format.type must be \"text\", \"json_object\" or "
                                    "\"json_schema\", got {}",
                                    JsonPreview(*type)));
  }
  const auto schema_object = format.find("json_schema");
  if (schema_object == format.end() || !schema_object->is_object()) {
    return InvalidParam("response_format",
                        "response_format.json_schema must be an object with \"name\" and "
                        "\"schema\"");
  }
  const auto name = schema_object->find("name");
  if (name == schema_object->end() || !name->is_string() || name->get<std::string>().empty()) {
    return InvalidParam("response_format", "response_format.json_schema.name must be a string");
  }
  if (const auto strict = schema_object->find("strict");
      strict != schema_object->end() && !strict->is_null() && !strict->is_boolean()) {
    return InvalidParam("response_format",
                        "response_format.json_schema.strict must be a boolean");
  }
  const auto schema = schema_object->find("schema");
  // No schema: any JSON value (OpenAI requires one; vLLM accepts its absence).
  const std::string text = schema == schema_object->end() ? "{}" : schema->dump();
  if (schema != schema_object->end() && !schema->is_object() && !schema->is_boolean()) {
    return InvalidParam("response_format",
                        "response_format.json_schema.schema must be a JSON schema object");
  }
  return Checked({grammar::GrammarSpec::Kind::kJsonSchema, text}, "response_format",
                 "response_format.json_schema.schema");
}

absl::StatusOr<grammar::GrammarSpec> ForcedToolCallGrammar(const json& tools,
                                                           const std::string& function,
                                                           tool_calls::ToolFormat format,
                                                           bool parallel_tool_calls) {
  std::string arguments_key = "arguments";
  json wrap = {{"begin", ""}, {"end", ""}, {"separator", ""}, {"repeat", false}};
  switch (format) {
    case tool_calls::ToolFormat::kHermes:
      wrap["begin"] = "<tool_call>\n";
      wrap["end"] = "\n</tool_call>";
      wrap["separator"] = "\n";
      break;
    case tool_calls::ToolFormat::kLlama3Json:
      arguments_key = "parameters";
      wrap["separator"] = "; ";
      break;
    default:
      return InvalidParam(
          "tool_choice",
          fmt::format("tool_choice {} needs a tool-call format written in text; this model's "
                      "({}) is written with special tokens, which a grammar cannot force: use "
                      "\"auto\"",
                      function.empty() ? "\"required\"" : "naming a function",
                      tool_calls::ToolFormatName(format)));
  }
  wrap["repeat"] = function.empty() && parallel_tool_calls;
  // The calls in the order of `tools`; each one's properties in their written order
  // (name first). A tool's local references are rebased to where its parameters land.
  size_t matching = 0;
  for (const json& tool : tools) {
    if (function.empty() || tool["function"]["name"] == function) ++matching;
  }
  json calls = json::array();
  for (const json& tool : tools) {
    const json& f = tool["function"];
    const std::string name = f["name"].get<std::string>();
    if (!function.empty() && name != function) continue;
    json parameters = f.value("parameters", json());
    if (parameters.is_null()) parameters = json{{"type", "object"}};
    RebaseRefs(parameters,
               fmt::format("{}/properties/{}",
                           matching == 1 ? "" : fmt::format("/anyOf/{}", calls.size()),
                           arguments_key));
    json properties = json::object();
    properties["name"] = json{{"const", name}};
    properties[arguments_key] = std::move(parameters);
    json call = json::object();
    call["type"] = "object";
    call["properties"] = std::move(properties);
    call["required"] = json::array({"name", arguments_key});
    call["additionalProperties"] = false;
    calls.push_back(std::move(call));
  }
  json schema = calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
  schema["x-lockstep-wrap"] = std::move(wrap);
  return Checked({grammar::GrammarSpec::Kind::kJsonSchema, schema.dump()}, "tool_choice",
                 "the grammar of the tools' parameters");
}

}  // namespace lockstep::router
