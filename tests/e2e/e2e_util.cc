#include "tests/e2e/e2e_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/router.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::e2e {

absl::Status EnsureTinyMoe(const std::string& dir) {
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  if (std::filesystem::exists(std::filesystem::path(dir) / "config.json")) {
    return absl::OkStatus();
  }
  engine::MakeModelOptions options;
  options.preset = "tiny-moe";
  options.out_dir = dir;
  options.seed = 7;
  return engine::MakeModel(options);
}

std::string LockstepBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "lockstep",
                      "/tools/lockstep");
}

std::string CommSettings(absl::string_view transport) {
  return absl::StrCat("    comm: {vote_transport: ", transport, ", engine_transport: ", transport,
                      "}\n");
}

std::string CheckTransport(const launcher::LocalDeployment& d, absl::string_view transport) {
  const std::string want = absl::StrCat("executor collectives over ", transport,
                                        ", engine collectives over ", transport);
  std::string problems;
  for (const launcher::ProcessSpec& p : d.plan().workers) {
    if (!absl::StrContains(d.LogOf(p.name), want)) {
      absl::StrAppend(&problems, p.name, " did not log '", want, "'\n");
    }
  }
  return problems;
}

std::string DisaggYaml(const std::string& model_dir, bool fault_timeouts, absl::string_view comm) {
  return DisaggYaml(model_dir,
                    DisaggOptions{.fault_timeouts = fault_timeouts, .comm = std::string(comm)});
}

std::string DisaggYaml(const std::string& model_dir, const DisaggOptions& options) {
  std::vector<std::string> transfer_fields;
  if (options.fault_timeouts) transfer_fields.push_back("deadline_ms: 1500, lease_ms: 4000");
  if (!options.transfer_transport.empty()) {
    transfer_fields.push_back(absl::StrCat("transport: ", options.transfer_transport));
  }
  const std::string transfer = absl::StrCat(
      transfer_fields.empty()
          ? ""
          : absl::StrCat("    transfer: {", absl::StrJoin(transfer_fields, ", "), "}\n"),
      CommSettings(options.comm));
  std::string generation;
  for (const auto& [name, world_size] : options.generation) {
    absl::StrAppend(&generation, "  - name: ", name, R"(
    role: generation
    world_size: )",
                    world_size, R"(
    engine: cpu
    executor: {max_batch_size: )",
                    options.generation_max_batch_size, ", max_num_tokens: 64, max_num_active_requests: ",
                    options.generation_max_active_requests, R"(,
               draft_pool: unpaired, audit_every_step: true}
    kv: {tokens_per_block: 16, num_blocks: 256, draft_num_blocks: 256}
    speculative: {method: draft_model, num_draft_tokens: 3}
)",
                    transfer);
  }
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
  draft_path: )",
                      model_dir, R"(/draft
router:
  policy: least_load
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: )",
                      options.fault_timeouts ? "1500" : "2000", R"(
  health_check_interval_ms: 200
instances:
  - name: ctx0
    role: context
    world_size: 2
    engine: cpu
    executor: {max_batch_size: 8, max_num_tokens: 512, max_num_active_requests: 16,
               draft_pool: unpaired, audit_every_step: true}
    kv: {tokens_per_block: 16, num_blocks: 512, draft_num_blocks: 512}
    speculative: {method: draft_model, num_draft_tokens: 3}
)",
                      transfer, generation);
}

std::string TestTmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp ? tmp : "/tmp";
}

absl::StatusOr<v1::StatsResponse> InstanceStats(const launcher::LocalDeployment& d,
                                                const std::string& instance) {
  auto router = v1::RouterService::NewStub(
      security::CreateChannel(d.grpc_address()));
  grpc::ClientContext list_context;
  list_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ListInstancesResponse list;
  if (!router->ListInstances(&list_context, v1::ListInstancesRequest(), &list).ok()) {
    return absl::UnavailableError("ListInstances failed");
  }
  for (const v1::InstanceInfo& info : list.instances()) {
    if (info.name() != instance) continue;
    auto worker = v1::WorkerService::NewStub(
        security::CreateChannel(info.leader_address()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::StatsResponse stats;
    const grpc::Status s = worker->Stats(&context, v1::StatsRequest(), &stats);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    return stats;
  }
  return absl::NotFoundError(absl::StrCat("no instance ", instance));
}

std::string LogTails(const launcher::LocalDeployment& d, int lines) {
  std::string out;
  std::vector<launcher::ProcessSpec> all = d.plan().workers;
  all.insert(all.begin(), d.plan().router);
  for (const launcher::ProcessSpec& p : all) {
    std::ifstream in(p.log_path);
    std::vector<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(line);
      if (static_cast<int>(tail.size()) > lines) tail.erase(tail.begin());
    }
    absl::StrAppend(&out, "==== ", p.name, " (", p.log_path, ")\n");
    for (const std::string& line : tail) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string CheckAtRest(const launcher::LocalDeployment& d, const std::string& instance) {
  absl::StatusOr<v1::StatsResponse> stats = InstanceStats(d, instance);
  if (!stats.ok()) return stats.status().ToString();
  std::string problems;
  for (const v1::PoolStats& p : stats->pools()) {
    if (p.used_blocks() != 0) {
      absl::StrAppend(&problems, instance, " rank ", p.rank(), " ", p.pool(),
                      " pool: ", p.used_blocks(), " blocks still used; ");
    }
  }
  if (stats->active_requests() != 0 || stats->queued_requests() != 0) {
    absl::StrAppend(&problems, instance, ": ", stats->active_requests(), " active, ",
                    stats->queued_requests(), " queued requests; ");
  }
  if (stats->audit_violations() != 0) {
    absl::StrAppend(&problems, instance, ": ", stats->audit_violations(), " audit violations; ");
  }
  return problems;
}

SseCompletion ParseSseCompletion(absl::string_view body) {
  SseCompletion out;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (!absl::ConsumePrefix(&line, "data: ")) continue;
    if (line == "[DONE]") {
      out.done = true;
      continue;
    }
    const nlohmann::json chunk = nlohmann::json::parse(line, nullptr, false);
    if (!chunk.is_object()) continue;
    if (chunk.contains("error")) out.error = chunk["error"];
    if (chunk.contains("usage") && chunk["usage"].is_object()) out.usage = chunk["usage"];
    for (const nlohmann::json& choice : chunk.value("choices", nlohmann::json::array())) {
      const int index = choice.value("index", 0);
      out.text[index] += choice.value("text", "");
      if (choice["finish_reason"].is_string()) out.finish_reason[index] = choice["finish_reason"];
    }
  }
  return out;
}

double RouterMetric(const launcher::LocalDeployment& d, absl::string_view name) {
  const auto [status, body] = d.Get("/metrics");
  if (status != 200) return -1;
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || line.empty() || (line[0] != ' ' && line[0] != '{')) {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) sum += value;
  }
  return sum;
}

}  // namespace lockstep::e2e
