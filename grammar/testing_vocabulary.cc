#include "grammar/testing_vocabulary.h"

#include <random>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace lockstep::grammar {

std::shared_ptr<const Vocabulary> MakeTestingVocabulary(int32_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  auto vocab = std::make_shared<Vocabulary>();
  absl::flat_hash_set<std::string> seen;
  auto add = [&](std::string s) {
    if (static_cast<int32_t>(vocab->token_bytes.size()) >= size - 2) return;
    if (seen.insert(s).second) vocab->token_bytes.push_back(std::move(s));
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  const char* fragments[] = {"{\"",
                             "\":",
                             "\": ",
                             "\", \"",
                             "\",\"",
                             "},",
                             "}",
                             "]}",
                             "\"}",
                             "\"]",
                             "\"},",
                             "[{",
                             "[\"",
                             " \"",
                             "\": \"",
                             "\":\"",
                             "\": [",
                             "\": {",
                             "\"\n",
                             ",\n",
                             "{\n",
                             "\n}",
                             "true",
                             "false",
                             "null",
                             " true",
                             " false",
                             " null",
                             "\\n",
                             "\\\"",
                             "\\u00",
                             "  ",
                             "    ",
                             "\n  ",
                             "\n    ",
                             "0.",
                             "-1",
                             "e+",
                             "E-",
                             "\xC3\xA9",
                             "\xE2\x82\xAC",
                             "\xF0\x9F\x98\x80",
                             "@example.com",
                             "http://",
                             "://",
                             "2026-",
                             "-12-",
                             "T12:",
                             ":00Z",
                             "\":1",
                             "1,",
                             "\":\"x\"}"};
  for (const char* f : fragments) add(f);
  const char* words[] = {"name", "id",   "age",   "type", "value", "items", "the",   "a",    "of",
                         "data", "user", "email", "date", "time",  "list",  "key",   "x",    "y",
                         "foo",  "bar",  "tool",  "call", "args",  "city",  "price", "count"};
  for (const char* w : words) {
    add(w);
    add(std::string(" ") + w);
    add(std::string("\"") + w);
    add(std::string("\"") + w + "\"");
    add(std::string("\"") + w + "\":");
    add(std::string(w) + "\"");
  }
  for (int i = 0; i < 1000; ++i) add(std::to_string(i));
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const std::string punct = "\"{}[],: .-_\n\\";
  while (static_cast<int32_t>(vocab->token_bytes.size()) < size - 2) {
    std::string s;
    if (rng() % 3 == 0) s += ' ';
    if (rng() % 8 == 0) s += punct[rng() % punct.size()];
    const int len = 1 + rng() % 9;
    for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
    if (rng() % 6 == 0) s += punct[rng() % punct.size()];
    if (rng() % 10 == 0) s += punct[rng() % punct.size()];
    add(std::move(s));
  }
  vocab->token_bytes.push_back("");  // a special token that is not text
  vocab->token_bytes.push_back("");  // the stop token
  vocab->stop_tokens.push_back(static_cast<int32_t>(vocab->token_bytes.size()) - 1);
  return vocab;
}

}  // namespace lockstep::grammar
