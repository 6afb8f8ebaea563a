#include "fuzz/json_mutator.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

namespace lockstep::fuzz {
namespace {

// One past the end of the value starting at `begin`, or npos when it is unterminated
// or `begin` starts no value.
size_t ValueEnd(std::string_view s, size_t begin) {
  if (begin >= s.size()) return std::string_view::npos;
  const char c = s[begin];
  if (c == '"' || c == '[' || c == '{') {
    int depth = 0;
    bool in_string = false;
    for (size_t i = begin; i < s.size(); ++i) {
      const char d = s[i];
      if (in_string) {
        if (d == '\\') {
          ++i;
        } else if (d == '"') {
          in_string = false;
          if (depth == 0) return i + 1;
        }
      } else if (d == '"') {
        in_string = true;
      } else if (d == '[' || d == '{') {
        ++depth;
      } else if (d == ']' || d == '}') {
        if (--depth == 0) return i + 1;
      }
    }
    return std::string_view::npos;
  }
  size_t i = begin;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' ||
                          s[i] == '+' || s[i] == '.')) {
    ++i;
  }
  return i == begin ? std::string_view::npos : i;
}

// Where values start: the first non-space byte, and the first after each ':', '[' or ','.
std::vector<size_t> ValueStarts(std::string_view s) {
  std::vector<size_t> starts;
  bool expect = true;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
    if (expect && c != ']' && c != '}') starts.push_back(i);
    expect = c == ':' || c == '[' || c == ',';
    if (c == '"') in_string = true;
  }
  return starts;
}

// Mostly around the depth limit, sometimes far past it.
size_t Depth(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return 60 + rng() % 10;
    case 1:
      return 1 + rng() % 200;
    case 2:
      return 1000 + rng() % 10000;
    default:
      return 10000 + rng() % 90001;
  }
}

size_t Width(std::mt19937_64& rng) {
  return rng() % 3 == 0 ? 1000 + rng() % 99001 : 2 + rng() % 2000;
}

std::string Scalar(std::mt19937_64& rng) {
  static constexpr const char* kEdges[] = {"2147483647",
                                           "2147483648",
                                           "-2147483648",
                                           "-2147483649",
                                           "4294967296",
                                           "4294967297",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "-9223372036854775809",
                                           "18446744073709551615",
                                           "18446744073709551616",
                                           "1e400",
                                           "-1e400",
                                           "-0",
                                           "0.5",
                                           "1e-400",
                                           "-1",
                                           "0",
                                           "true",
                                           "false",
                                           "null",
                                           "\"\"",
                                           "\"\\u0000\"",
                                           "\"\\ud800\"",
                                           "\"\\u00e9\"",
                                           "\"<|end|>\"",
                                           "\"{{ x }}\""};
  return kEdges[rng() % (sizeof(kEdges) / sizeof(kEdges[0]))];
}

void Generate(std::mt19937_64& rng, size_t budget, std::string* out) {
  const size_t start = out->size();
  const auto used = [&] { return out->size() - start; };
  switch (budget < 16 ? 0 : rng() % 6) {
    case 0:
      *out += Scalar(rng);
      return;
    case 1: {  // a deep chain
      const size_t n = std::min(Depth(rng), budget / 8 + 1);
      const bool objects = rng() % 2;
      for (size_t i = 0; i < n; ++i) *out += objects ? R"({"a":)" : "[";
      *out += Scalar(rng);
      for (size_t i = 0; i < n; ++i) *out += objects ? '}' : ']';
      return;
    }
    case 2: {  // a wide array of scalars
      const size_t n = std::min(Width(rng), budget / 4 + 1);
      *out += '[';
      for (size_t i = 0; i < n; ++i) *out += i == 0 ? "0" : ",0";
      *out += ']';
      return;
    }
    case 3: {  // a wide object, keys distinct or repeated
      const size_t n = std::min(Width(rng), budget / 10 + 1);
      const bool repeat = rng() % 2;
      *out += '{';
      for (size_t i = 0; i < n; ++i) {
        *out += (i == 0 ? "\"k" : ",\"k") + std::to_string(repeat ? i % 3 : i) + "\":1";
      }
      *out += '}';
      return;
    }
    default: {  // a random tree
      const bool object = rng() % 2;
      *out += object ? '{' : '[';
      for (int i = 0, n = static_cast<int>(rng() % 6); i < n && used() < budget; ++i) {
        if (i > 0) *out += ',';
        if (object) *out += "\"" + std::string(1, static_cast<char>('a' + rng() % 4)) + "\":";
        Generate(rng, (budget - std::min(budget, used())) / 2, out);
      }
      *out += object ? '}' : ']';
      return;
    }
  }
}

}  // namespace

std::string GenerateJson(std::mt19937_64& rng, size_t budget) {
  std::string out;
  Generate(rng, budget, &out);
  return out;
}

std::string MutateJson(std::string_view json, std::mt19937_64& rng, size_t max_size) {
  const std::vector<size_t> starts = ValueStarts(json);
  size_t begin = 0, end = json.size();
  if (!starts.empty()) {
    begin = starts[rng() % starts.size()];
    end = ValueEnd(json, begin);
    if (end == std::string_view::npos) end = json.size();
  }
  const std::string_view value = json.substr(begin, end - begin);
  const size_t room =
      max_size > json.size() - value.size() ? max_size - (json.size() - value.size()) : 0;
  std::string replacement;
  switch (rng() % 5) {
    case 0: {  // the value, nested N deep
      const bool objects = rng() % 2;
      const size_t per_level = objects ? 6 : 2;
      const size_t n =
          std::min(Depth(rng), room > value.size() ? (room - value.size()) / per_level : 0);
      for (size_t i = 0; i < n; ++i) replacement += objects ? R"({"a":)" : "[";
      replacement += value;
      for (size_t i = 0; i < n; ++i) replacement += objects ? '}' : ']';
      break;
    }
    case 1: {  // N copies of the value
      const bool object = rng() % 2;
      const size_t each = value.size() + (object ? 12 : 1);
      const size_t n = std::max<size_t>(1, std::min(Width(rng), room / each));
      const bool repeat = rng() % 2;
      replacement += object ? '{' : '[';
      for (size_t i = 0; i < n; ++i) {
        if (i > 0) replacement += ',';
        if (object) replacement += "\"k" + std::to_string(repeat ? i % 2 : i) + "\":";
        replacement += value;
      }
      replacement += object ? '}' : ']';
      break;
    }
    case 2:
      replacement = GenerateJson(rng, std::min<size_t>(room, 1 << 20));
      break;
    default:
      replacement = Scalar(rng);
  }
  std::string out(json.substr(0, begin));
  out += replacement;
  out += json.substr(end);
  if (out.size() > max_size) return std::string(json);
  return out;
}

size_t MutateJsonInput(uint8_t* data, size_t size, size_t max_size, unsigned int seed,
                       size_t prefix) {
  std::mt19937_64 rng(seed);
  if (prefix > size || rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const std::string_view json(reinterpret_cast<const char*>(data) + prefix, size - prefix);
  const std::string mutated = MutateJson(json, rng, max_size - prefix);
  std::memcpy(data + prefix, mutated.data(), mutated.size());
  return prefix + mutated.size();
}

}  // namespace lockstep::fuzz
