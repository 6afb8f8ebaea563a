#include "runtime/router/http/openai_tools.h"

#include <set>
#include <string>

#include "fmt/format.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/http/request_fields.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// The names of `tools`, checked.
absl::StatusOr<std::set<std::string>> ToolNames(const json& tools) {
  if (!tools.is_array()) {
    return InvalidParam("tools", fmt::format("tools must be an array, got {}", tools.type_name()));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    const auto type = tool.is_object() ? tool.find("type") : tool.end();
    if (!tool.is_object() || type == tool.end() || *type != "function") {
      return InvalidParam("tools", fmt::format("tools[{}] must be an object with \"type\": "
                                               "\"function\"",
                                               i));
    }
    const auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) {
      return InvalidParam("tools", fmt::format("tools[{}].function must be an object", i));
    }
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string() ||
        !ValidName(name->get_ref<const std::string&>())) {
      return InvalidParam("tools",
                          fmt::format("tools[{}].function.name must be a string of 1 to 64 "
                                      "letters, digits, '_' or '-', got {}",
                                      i, name == function->end() ? "none" : JsonPreview(*name)));
    }
    if (const auto parameters = function->find("parameters");
        parameters != function->end() && !parameters->is_null() && !parameters->is_object()) {
      return InvalidParam("tools", fmt::format("tools[{}].function.parameters must be a JSON "
                                               "schema object, got {}",
                                               i, parameters->type_name()));
    }
    if (const auto description = function->find("description");
        description != function->end() && !description->is_null() && !description->is_string()) {
      return InvalidParam("tools",
                          fmt::format("tools[{}].function.description must be a string", i));
    }
    if (!names.insert(name->get<std::string>()).second) {
      return InvalidParam("tools", fmt::format("tools[{}]: the function name '{}' is used twice",
                                               i, name->get<std::string>()));
    }
  }
  return names;
}

}  // namespace

absl::StatusOr<ToolOptions> ParseToolOptions(const json& body) {
  ToolOptions options;
  std::set<std::string> names;
  if (const auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
    absl::StatusOr<std::set<std::string>> checked = ToolNames(*tools);
    if (!checked.ok()) return checked.status();
    names = *std::move(checked);
    options.has_tools = !names.empty();
  }
  std::string choice = options.has_tools ? "auto" : "none";
  if (const auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      choice = it->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        return InvalidParam("tool_choice",
                            fmt::format("tool_choice must be \"none\", \"auto\", \"required\" or "
                                        "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, "
                                        "got {}",
                                        JsonPreview(*it)));
      }
    } else if (it->is_object()) {
      const auto function = it->find("function");
      const json* name = nullptr;
      if (function != it->end() && function->is_object()) {
        const auto found = function->find("name");
        if (found != function->end()) name = &*found;
      }
      if (it->value("type", json()) != "function" || name == nullptr || !name->is_string()) {
        return InvalidParam("tool_choice", "tool_choice must be {\"type\": \"function\", "
                                           "\"function\": {\"name\": ...}} when an object");
      }
      if (names.count(name->get<std::string>()) == 0) {
        return InvalidParam("tool_choice",
                            fmt::format("tool_choice names the function '{}', which is not in "
                                        "tools",
                                        name->get<std::string>()));
      }
      choice = "named";
    } else {
      return InvalidParam("tool_choice", fmt::format("tool_choice must be a string or an object, "
                                                     "got {}",
                                                     it->type_name()));
    }
  }
  if (choice != "none" && !options.has_tools) {
    return InvalidParam("tool_choice", "tool_choice other than \"none\" needs tools");
  }
  options.force_tool_call = choice == "required" || choice == "named";
  if (choice == "named") {
    options.forced_function = body["tool_choice"]["function"]["name"].get<std::string>();
  }
  options.parse_tool_calls = choice != "none";
  auto parallel = OptionalBool(body, "parallel_tool_calls", true);
  if (!parallel.ok()) return parallel.status();
  options.parallel_tool_calls = *parallel;
  auto reasoning = OptionalBool(body, "include_reasoning", true);
  if (!reasoning.ok()) return reasoning.status();
  options.include_reasoning = *reasoning;
  return options;
}

}  // namespace lockstep::router
