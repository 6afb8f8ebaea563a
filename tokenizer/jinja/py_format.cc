#include "tokenizer/jinja/py_format.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/pyops.h"

namespace lockstep::tok::jinja {
namespace {

// Walks a str.format string: literal text ({{ and }} unescaped) is appended to `out`;
// each replacement field goes to `field` as its name and path ("0", "x.attr", "m[k]")
// and its conversion ('s' or 'r').
absl::Status WalkFormat(
    absl::string_view format, std::string* out,
    const std::function<absl::Status(absl::string_view name, char conversion)>& field) {
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out->push_back('}');
        ++i;
        continue;
      }
      return ValueError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out->push_back(c);
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out->push_back('{');
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == absl::string_view::npos) return ValueError("Single '{' encountered in format string");
    absl::string_view name = format.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (name.find(':') != absl::string_view::npos) {
      return ValueError(absl::StrCat("unsupported format spec in '{", name, "}'"));
    }
    if (const size_t bang = name.find('!'); bang != absl::string_view::npos) {
      if (bang + 2 != name.size() || (name[bang + 1] != 'r' && name[bang + 1] != 's')) {
        return ValueError(absl::StrCat("unsupported conversion in '{", name, "}'"));
      }
      conversion = name[bang + 1];
      name = name.substr(0, bang);
    }
    if (absl::Status status = field(name, conversion); !status.ok()) return status;
  }
  return absl::OkStatus();
}

// The % conversions PyPercentFormat implements.
constexpr absl::string_view kPercentConversions = "srdif";

// Walks a %-format string: literal text (%% unescaped) is appended to `out`; each
// conversion character goes to `conversion`.
absl::Status WalkPercent(absl::string_view format, std::string* out,
                         const std::function<absl::Status(char spec)>& conversion) {
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out->push_back(format[i]);
      continue;
    }
    if (i + 1 >= format.size()) return ValueError("incomplete format");
    const char spec = format[++i];
    if (spec == '%') {
      out->push_back('%');
      continue;
    }
    if (kPercentConversions.find(spec) == absl::string_view::npos) {
      return ValueError(absl::StrCat("unsupported format character '", std::string(1, spec),
                                     "' (no flags, width, precision or mapping keys)"));
    }
    if (absl::Status status = conversion(spec); !status.ok()) return status;
  }
  return absl::OkStatus();
}

// The value a replacement field names: its head (an index, empty for the next one, or a
// keyword) then .attr and [key] steps.
absl::StatusOr<Value> FieldValue(absl::string_view field, const CallArgs& args,
                                 size_t* auto_index) {
  size_t end = 0;
  while (end < field.size() && field[end] != '.' && field[end] != '[') ++end;
  const absl::string_view head = field.substr(0, end);
  Value v;
  size_t index = 0;
  if (head.empty() || absl::SimpleAtoi(head, &index)) {
    if (head.empty()) index = (*auto_index)++;
    if (index >= args.positional.size()) {
      return absl::InvalidArgumentError(absl::StrCat("IndexError: Replacement index ", index, " out of range for positional args tuple"));
    }
    v = args.positional[index];
  } else {
    const auto it = std::find_if(args.keyword.begin(), args.keyword.end(),
                                 [&](const auto& kw) { return kw.first == head; });
    if (it == args.keyword.end()) return absl::InvalidArgumentError(absl::StrCat("KeyError: '", head, "'"));
    v = it->second;
  }
  while (end < field.size()) {
    absl::StatusOr<Value> next;
    if (field[end] == '.') {
      size_t stop = end + 1;
      while (stop < field.size() && field[stop] != '.' && field[stop] != '[') ++stop;
      next = GetAttr(v, field.substr(end + 1, stop - end - 1));
      end = stop;
    } else {
      const size_t stop = field.find(']', end);
      if (stop == absl::string_view::npos) return ValueError("Missing ']' in format string");
      const absl::string_view key = field.substr(end + 1, stop - end - 1);
      int64_t k = 0;
      next = absl::SimpleAtoi(key, &k) ? GetItem(v, Value::Int(k)) : GetItem(v, Value::String(std::string(key)));
      end = stop + 1;
    }
    if (!next.ok()) return next.status();
    v = std::move(*next);
  }
  return v;
}

}  // namespace

absl::StatusOr<std::string> PyFormat(absl::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  absl::Status status =
      WalkFormat(format, &out, [&](absl::string_view field, char conversion) -> absl::Status {
        absl::StatusOr<Value> v = FieldValue(field, args, &auto_index);
        if (!v.ok()) return v.status();
        out += conversion == 'r' ? Repr(*v) : Str(*v);
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<std::string> PyPercentFormat(absl::string_view format, const Value& args) {
  const std::vector<Value> values =
      args.kind() == Value::Kind::kTuple ? args.items() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  absl::Status status = WalkPercent(format, &out, [&](char spec) -> absl::Status {
    if (next >= values.size()) return TypeError("not enough arguments for format string");
    const Value& v = values[next++];
    switch (spec) {
      case 's': out += Str(v); break;
      case 'r': out += Repr(v); break;
      case 'd':
      case 'i':
        if (!v.is_number()) return TypeError(absl::StrCat("%", std::string(1, spec), " format: a real number is required, not ", TypeName(v)));
        absl::StrAppend(&out, v.is_int() ? v.as_int() : static_cast<int64_t>(v.as_double()));
        break;
      default:  // 'f'
        if (!v.is_number()) return TypeError(absl::StrCat("must be real number, not ", TypeName(v)));
        absl::StrAppendFormat(&out, "%.6f", v.as_double());
        break;
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (next < values.size()) return TypeError("not all arguments converted during string formatting");
  return out;
}

absl::Status CheckFormat(absl::string_view format) {
  std::string text;
  return WalkFormat(format, &text,
                    [](absl::string_view, char) { return absl::OkStatus(); });
}

absl::Status CheckPercentFormat(absl::string_view format) {
  std::string text;
  return WalkPercent(format, &text, [](char) { return absl::OkStatus(); });
}

}  // namespace lockstep::tok::jinja
