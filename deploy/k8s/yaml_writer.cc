#include "deploy/k8s/yaml_writer.h"

#include <algorithm>
#include <cctype>

namespace lockstep::deploy {
namespace {

using Json = nlohmann::ordered_json;

bool IsKeyword(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}) {
    if (text == word) return true;
  }
  return false;
}

// Letters, digits and a few separators, starting with a letter or '/': never a
// number, a bool, null, an anchor, a tag or a comment.
bool CanBePlain(const std::string& text) {
  if (text.empty() || IsKeyword(text)) return false;
  if (!std::isalpha(static_cast<unsigned char>(text[0])) && text[0] != '/') return false;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("-_./").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

std::string Scalar(const Json& value) {
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    return CanBePlain(text) ? text : value.dump();  // JSON strings are YAML double-quoted
  }
  return value.dump();  // numbers, bools, null
}

bool IsBlockString(const Json& value) {
  return value.is_string() && value.get_ref<const std::string&>().find('\n') != std::string::npos;
}

bool IsEmptyCollection(const Json& value) {
  return (value.is_object() || value.is_array()) && value.empty();
}

void Write(const Json& value, int indent, std::string& out);

// After "key:" or "-": the value on the same line, or a newline and the nested block
// (a sequence under a key at the key's indent, as kubectl writes it).
void WriteAfterIndicator(const Json& value, int indent, bool after_key, std::string& out) {
  if (IsEmptyCollection(value)) {
    out += value.is_object() ? " {}\n" : " []\n";
  } else if (IsBlockString(value)) {
    const std::string& text = value.get_ref<const std::string&>();
    // Chomping: "|-" drops the final newline, "|" keeps one, "|+" keeps them all.
    const bool several = text.size() >= 2 && text.compare(text.size() - 2, 2, "\n\n") == 0;
    out += several ? " |+\n" : text.back() == '\n' ? " |\n" : " |-\n";
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      if (!line.empty()) out += std::string(indent + 2, ' ') + line;
      out += "\n";
      start = end + 1;
    }
  } else if (value.is_object() || value.is_array()) {
    out += "\n";
    Write(value, value.is_array() && after_key ? indent : indent + 2, out);
  } else {
    out += " " + Scalar(value) + "\n";
  }
}

void Write(const Json& value, int indent, std::string& out) {
  const std::string pad(indent, ' ');
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      out += pad + Scalar(Json(key)) + ":";
      WriteAfterIndicator(child, indent, /*after_key=*/true, out);
    }
  } else if (value.is_array()) {
    for (const Json& item : value) {
      if (item.is_object() && !item.empty()) {
        // "- " then the mapping's first key on the same line, the rest aligned under it.
        std::string nested;
        Write(item, indent + 2, nested);
        out += pad + "- " + nested.substr(indent + 2);
      } else {
        out += pad + "-";
        WriteAfterIndicator(item, indent, /*after_key=*/false, out);
      }
    }
  } else {
    out += pad + Scalar(value) + "\n";
  }
}

}  // namespace

std::string ToYaml(const nlohmann::ordered_json& value) {
  std::string out;
  Write(value, 0, out);
  return out;
}

}  // namespace lockstep::deploy
