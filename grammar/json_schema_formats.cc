#include "grammar/json_schema_formats.h"

namespace lockstep::grammar {
namespace {

constexpr char kDate[] =
    "\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|"
    "02-(?:0[1-9]|1\\d|2[0-8]))";
constexpr char kTime[] =
    "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,6})?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)";
constexpr char kLabel[] = "[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?";

}  // namespace

std::string FormatRegex(std::string_view format) {
  if (format == "date") return std::string("^") + kDate + "$";
  if (format == "time") return std::string("^") + kTime + "$";
  if (format == "date-time") return std::string("^") + kDate + "T" + kTime + "$";
  if (format == "email") {
    return std::string("^[a-zA-Z0-9_+-]{1,32}(?:\\.[a-zA-Z0-9_+-]{1,32}){0,3}@") + kLabel +
           "(?:\\." + kLabel + "){1,3}$";
  }
  if (format == "uuid") {
    return "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
  }
  if (format == "uri") {
    return std::string("^https?://") + kLabel + "(?:\\." + kLabel +
           "){0,3}(?:/[a-zA-Z0-9._~-]{0,32}){0,8}$";
  }
  if (format == "ipv4") {
    return "^(?:(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?"
           "\\d)$";
  }
  if (format == "hostname") return std::string("^") + kLabel + "(?:\\." + kLabel + "){0,3}$";
  return "";
}

}  // namespace lockstep::grammar
