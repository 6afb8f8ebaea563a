#include "runtime/config/deployment_config.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace lockstep::config {
namespace {

template <typename Enum, size_t N>
using NameTable = std::array<std::pair<Enum, std::string_view>, N>;

constexpr NameTable<EngineKind, 3> kEngineNames = {
    {{EngineKind::kCpu, "cpu"}, {EngineKind::kFake, "fake"}, {EngineKind::kCuda, "cuda"}}};
constexpr NameTable<RoutingPolicy, 3> kPolicyNames = {{{RoutingPolicy::kRoundRobin, "round_robin"},
                                                       {RoutingPolicy::kLeastLoad, "least_load"},
                                                       {RoutingPolicy::kKvAware, "kv_aware"}}};
constexpr NameTable<CommTransport, 4> kTransportNames = {{{CommTransport::kGloo, "gloo"},
                                                          {CommTransport::kShm, "shm"},
                                                          {CommTransport::kAuto, "auto"},
                                                          {CommTransport::kNccl, "nccl"}}};
constexpr NameTable<TransferTransport, 3> kTransferTransportNames = {
    {{TransferTransport::kUcx, "ucx"},
     {TransferTransport::kTcp, "tcp"},
     {TransferTransport::kGrpc, "grpc"}}};

template <typename Enum, size_t N>
std::string_view NameOf(const NameTable<Enum, N>& table, Enum value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "?";
}

absl::Status UnknownName(const std::vector<std::string_view>& names, std::string_view name) {
  return absl::InvalidArgumentError(
      fmt::format("must be one of {}, got '{}'", fmt::join(names, " | "), name));
}

template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseName(const NameTable<Enum, N>& table, std::string_view name) {
  std::vector<std::string_view> names;
  for (const auto& [v, n] : table) {
    if (n == name) return v;
    names.push_back(n);
  }
  return UnknownName(names, name);
}

bool IsNameChar(char c, bool allow_dot) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || (allow_dot && c == '.');
}

// Collects problems, each prefixed with its field path.
class Problems {
 public:
  void Add(std::string_view path, std::string_view message) {
    lines_.push_back(fmt::format("{}: {}", path, message));
  }
  void AtLeast(std::string_view path, int64_t value, int64_t min) {
    if (value < min) Add(path, absl::StrCat("must be >= ", min, ", got ", value));
  }
  void InRange(std::string_view path, int64_t value, int64_t min, int64_t max) {
    if (value < min || value > max) {
      Add(path, absl::StrCat("must be in [", min, ", ", max, "], got ", value));
    }
  }
  void Name(std::string_view path, const std::string& value, bool allow_dot) {
    if (value.empty()) {
      Add(path, "is required");
      return;
    }
    for (char c : value) {
      if (!IsNameChar(c, allow_dot)) {
        Add(path, absl::StrCat("must contain only letters, digits, ", allow_dot ? "'.', " : "",
                               "'_' and '-', got '", value, "'"));
        return;
      }
    }
  }
  // A line that already names its field.
  void Line(std::string line) { lines_.push_back(std::move(line)); }
  void HostPort(std::string_view path, std::string_view address) {
    absl::Status status = ValidateHostPort(path, address);
    if (!status.ok()) lines_.push_back(std::string(status.message()));
  }
  absl::Status ToStatus() const {
    if (lines_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(lines_, "\n"));
  }

 private:
  std::vector<std::string> lines_;
};

// The speculative block was written (not all defaults).
bool HasSpeculativeBlock(const spec::SpeculativeConfig& s) {
  return s != spec::SpeculativeConfig();
}

// `speculative:` (its rules are spec::SpeculativeConfig's) or its alias `executor.spec_k`,
// and the draft pool it needs.
void ValidateSpeculative(const InstanceConfig& instance, const std::string& prefix,
                         Problems& problems) {
  const ExecutorSettings& e = instance.executor;
  const std::string ex = prefix + ".executor";
  if (!HasSpeculativeBlock(instance.speculative)) {
    problems.InRange(ex + ".spec_k", e.spec_k, 0, 16);
    if (e.spec_k > 0 && e.draft_pool == DraftPool::kNone) {
      problems.Add(
          ex + ".draft_pool",
          absl::StrCat("must be paired or unpaired when spec_k > 0 (spec_k is ", e.spec_k, ")"));
    }
    if (e.spec_k == 0 && e.draft_pool != DraftPool::kNone) {
      problems.Add(ex + ".draft_pool", fmt::format("must be none when spec_k is 0, got {}",
                                                   DraftPoolName(e.draft_pool)));
    }
    return;
  }
  const std::string sp = prefix + ".speculative";
  if (e.spec_k != 0) {
    problems.Add(ex + ".spec_k",
                 absl::StrCat("is an alias of ", sp, ".num_draft_tokens: give one, not both"));
  }
  for (const spec::ConfigProblem& p : instance.speculative.Problems()) {
    problems.Add(sp + "." + p.field, p.message);
  }
  if (const std::string pool = instance.speculative.DraftPoolProblem(e.draft_pool); !pool.empty()) {
    problems.Add(ex + ".draft_pool", pool);
  }
}

void ValidateInstance(const InstanceConfig& instance, const std::string& prefix,
                      Problems& problems) {
  problems.Name(prefix + ".name", instance.name, /*allow_dot=*/false);
  problems.InRange(prefix + ".world_size", instance.world_size, 1, 64);
  if (!instance.leader_address.empty()) {
    problems.HostPort(prefix + ".leader_address", instance.leader_address);
  }
  const ExecutorSettings& e = instance.executor;
  const std::string ex = prefix + ".executor";
  problems.AtLeast(ex + ".max_batch_size", e.max_batch_size, 1);
  problems.AtLeast(ex + ".max_num_tokens", e.max_num_tokens, 1);
  problems.AtLeast(ex + ".max_num_active_requests", e.max_num_active_requests, 1);
  problems.AtLeast(ex + ".chunk_size", e.chunk_size, 1);
  problems.AtLeast(ex + ".step_timeout_ms", e.step_timeout_ms, 1);
  problems.InRange(ex + ".blas_threads", e.blas_threads, 1, 256);
  ValidateSpeculative(instance, prefix, problems);
  const EplbSettings& eplb = instance.eplb;
  problems.InRange(prefix + ".eplb.load_window", eplb.load_window, 0, 1000000);
  if ((!eplb.expert_placement.empty() || eplb.load_window > 0) &&
      instance.engine != EngineKind::kCpu) {
    problems.Add(prefix + ".eplb", "needs engine: cpu (the CPU engine's expert parallelism)");
  }
  if (!eplb.load_dump.empty() && eplb.load_window == 0) {
    problems.Add(prefix + ".eplb.load_dump", "needs load_window > 0");
  }
  problems.InRange(prefix + ".eplb.rebalance_windows", eplb.rebalance_windows, 0, 1000000);
  problems.InRange(prefix + ".eplb.redundant_slots", eplb.redundant_slots, 0, 64);
  if (eplb.rebalance_windows > 0 && eplb.load_window == 0) {
    problems.Add(prefix + ".eplb.rebalance_windows", "needs load_window > 0");
  }
  if (e.chunk_size >= 1 && e.max_num_tokens >= 1 && e.chunk_size > e.max_num_tokens) {
    problems.Add(ex + ".chunk_size", absl::StrCat("must be <= max_num_tokens (", e.max_num_tokens,
                                                  "), got ", e.chunk_size));
  }
  const int64_t k = HasSpeculativeBlock(instance.speculative)
                        ? instance.speculative.num_draft_tokens
                        : e.spec_k;
  if (e.max_batch_size >= 1 && k >= 0 && k <= spec::kMaxDraftTokens &&
      e.max_num_tokens < e.max_batch_size * (1 + k)) {
    problems.Add(ex + ".max_num_tokens",
                 absl::StrCat("must be >= max_batch_size * (1 + ",
                              HasSpeculativeBlock(instance.speculative)
                                  ? "speculative.num_draft_tokens"
                                  : "spec_k",
                              ") = ", e.max_batch_size * (1 + k), ", got ", e.max_num_tokens));
  }
  const std::string kv = prefix + ".kv";
  problems.InRange(kv + ".tokens_per_block", instance.kv.tokens_per_block, 1, 4096);
  if (!instance.kv.num_blocks_auto) {
    problems.AtLeast(kv + ".num_blocks", instance.kv.num_blocks, 1);
  } else if (instance.engine != EngineKind::kCuda) {
    // Only the CUDA engine holds a GPU to size its pool from.
    problems.Add(kv + ".num_blocks",
                 fmt::format("auto sizes the pool from free GPU memory and needs a GPU engine, "
                             "but the engine is {} (give a block count)",
                             EngineKindName(instance.engine)));
  }
  if (!(instance.kv.free_memory_fraction > 0 && instance.kv.free_memory_fraction < 1)) {
    problems.Add(kv + ".free_memory_fraction",
                 fmt::format("must be > 0 and < 1, got {}", instance.kv.free_memory_fraction));
  }
  if (e.draft_pool != DraftPool::kNone) {
    problems.AtLeast(kv + ".draft_num_blocks", instance.kv.draft_num_blocks, 1);
  }
  // NCCL runs on the GPUs the CUDA engine holds, one per rank; the CPU and fake
  // engines have none.
  for (const auto& [field, transport] : {std::pair{"vote_transport", instance.comm.vote_transport},
                                         std::pair{"engine_transport",
                                                   instance.comm.engine_transport}}) {
    if (transport == CommTransport::kNccl && instance.engine != EngineKind::kCuda) {
      problems.Add(prefix + ".comm." + field,
                   fmt::format("nccl needs the CUDA engine and a GPU per rank, but the engine "
                               "is {} (use gloo, shm or auto)",
                               EngineKindName(instance.engine)));
    }
  }
  // The vote stays on the host until a multi-GPU run shows NCCL votes beside the
  // engine's NCCL all-to-all without a hang (docs/design.md §10).
  if (instance.comm.vote_transport == CommTransport::kNccl &&
      instance.engine == EngineKind::kCuda) {
    problems.Add(prefix + ".comm.vote_transport",
                 "nccl is not available for the executor's collectives yet (use gloo, shm or "
                 "auto; the engine's own group takes nccl: comm.engine_transport)");
  }
  if (instance.engine == EngineKind::kCuda) {
    for (const std::string& line :
         CudaSettingsProblems(instance.cuda, prefix + ".cuda", e.max_batch_size * (1 + k))) {
      problems.Line(line);
    }
  } else if (!(instance.cuda == CudaSettings())) {
    problems.Add(prefix + ".cuda", fmt::format("applies to engine cuda only, but the engine is {}",
                                               EngineKindName(instance.engine)));
  }
  const std::string tr = prefix + ".transfer";
  problems.AtLeast(tr + ".deadline_ms", instance.transfer.deadline_ms, 1);
  if (instance.transfer.lease_ms < instance.transfer.deadline_ms) {
    problems.Add(tr + ".lease_ms",
                 absl::StrCat("must be >= transfer.deadline_ms (", instance.transfer.deadline_ms,
                              "), got ", instance.transfer.lease_ms));
  }
}

bool IsEnvName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    if (!IsNameChar(c, /*allow_dot=*/false) || c == '-') return false;
  }
  return true;
}

// A Kubernetes label key: an optional DNS prefix and '/', then a name of letters,
// digits, '-', '_' and '.'.
bool IsLabelKey(std::string_view key) {
  if (key.empty() || key.size() > 316) return false;
  for (char c : key) {
    if (!IsNameChar(c, /*allow_dot=*/true) && c != '/') return false;
  }
  return key.find('/') == key.rfind('/') && key.front() != '/' && key.back() != '/';
}

void ValidatePlacement(const PlacementConfig& placement,
                       const std::vector<InstanceConfig>& instances, Problems& problems) {
  problems.InRange("placement.gpus_per_node", placement.gpus_per_node, 0, 64);
  problems.InRange("placement.nodes_per_instance", placement.nodes_per_instance, 1, 64);
  if (placement.nodes_per_instance >= 1) {
    for (size_t i = 0; i < instances.size(); ++i) {
      const int64_t world = instances[i].world_size;
      const std::string field = absl::StrCat("instances[", i, "].world_size");
      if (world % placement.nodes_per_instance != 0) {
        problems.Add(field, absl::StrCat("must be a multiple of placement.nodes_per_instance (",
                                         placement.nodes_per_instance, "), got ", world));
      } else if (placement.gpus_per_node > 0 &&
                 world / placement.nodes_per_instance > placement.gpus_per_node) {
        problems.Add("placement.gpus_per_node",
                     absl::StrCat("must be >= the ranks per node of ", instances[i].name, " (",
                                  field, " / nodes_per_instance = ",
                                  world / placement.nodes_per_instance, "), got ",
                                  placement.gpus_per_node));
      }
    }
  }
  absl::flat_hash_set<std::string> env_names;
  for (const auto& [name, value] : placement.env) {
    const std::string field = absl::StrCat("placement.env.", name);
    if (!IsEnvName(name)) {
      problems.Add(field, "must be a variable name ([A-Za-z_][A-Za-z0-9_]*)");
    } else if (name.rfind("LOCKSTEP_", 0) == 0) {
      problems.Add(field, "LOCKSTEP_* variables are set by Lockstep itself");
    } else if (!env_names.insert(name).second) {
      problems.Add(field, "is set twice");
    }
  }
  if (!placement.topology_key.empty() && !IsLabelKey(placement.topology_key)) {
    problems.Add("placement.topology_key",
                 absl::StrCat("must be a node label key like nvidia.com/gpu.clique, got '",
                              placement.topology_key, "'"));
  }
  if (placement.compute_domain && placement.gpus_per_node == 0) {
    problems.Add("placement.compute_domain", "needs placement.gpus_per_node > 0");
  }
  absl::flat_hash_set<std::string> resource_names;
  for (const auto& [name, count] : placement.rdma_resources) {
    const std::string field = absl::StrCat("placement.rdma_resources.", name);
    if (!IsLabelKey(name)) {
      problems.Add(field, "must be a resource name like rdma/ib");
    } else if (!resource_names.insert(name).second) {
      problems.Add(field, "is set twice");
    }
    if (count < 1) problems.Add(field, absl::StrCat("must be >= 1, got ", count));
  }
}

void ValidateSecurity(const SecurityConfig& security, Problems& problems) {
  const int tls_files = !security.tls_cert_file.empty() + !security.tls_key_file.empty() +
                        !security.tls_ca_file.empty();
  if (tls_files != 0 && tls_files != 3) {
    for (const auto& [field, value] : {std::pair{"tls_cert_file", &security.tls_cert_file},
                                       std::pair{"tls_key_file", &security.tls_key_file},
                                       std::pair{"tls_ca_file", &security.tls_ca_file}}) {
      if (value->empty()) {
        problems.Add(absl::StrCat("security.", field),
                     "is required with the other TLS files (tls_cert_file, tls_key_file and "
                     "tls_ca_file go together)");
      }
    }
  }
  if (tls_files == 0 && !security.tls_server_name.empty()) {
    problems.Add("security.tls_server_name", "needs tls_cert_file, tls_key_file and tls_ca_file");
  }
}

// A generation instance whose drafter keeps draft KV (a draft pool: draft_model, mtp)
// verifies its first steps on the draft KV its context instance made, which only a
// context instance drafting the same way makes: any other context instance is refused
// here, naming both (the KV pull would refuse each request). A generation instance
// without a draft pool takes any context instance's target KV alone.
void ValidateDraftKvSources(const std::vector<InstanceConfig>& instances, Problems& problems) {
  for (size_t g = 0; g < instances.size(); ++g) {
    const InstanceConfig& gen = instances[g];
    if (gen.role != InstanceRole::kGeneration || gen.executor.draft_pool == DraftPool::kNone) {
      continue;
    }
    const spec::Method method = EffectiveSpeculative(gen).method;
    for (const InstanceConfig& ctx : instances) {
      if (ctx.role != InstanceRole::kContext) continue;
      const spec::Method theirs = EffectiveSpeculative(ctx).method;
      if (ctx.executor.draft_pool != DraftPool::kNone && theirs == method) continue;
      problems.Add(
          absl::StrCat("instances[", g, "].speculative.method"),
          absl::StrCat("generation instance '", gen.name, "' drafts with ",
                       spec::MethodName(method), " on the draft KV its context instance makes, "
                       "but context instance '", ctx.name, "' ",
                       ctx.executor.draft_pool == DraftPool::kNone
                           ? absl::StrCat("has no draft pool (speculative.method ",
                                          spec::MethodName(theirs), ")")
                           : absl::StrCat("drafts with ", spec::MethodName(theirs)),
                       ": give '", ctx.name,
                       "' speculative.method ", spec::MethodName(method), " or '", gen.name,
                       "' a method without draft KV (none, ngram)"));
    }
  }
}

}  // namespace

std::string_view EngineKindName(EngineKind engine) { return NameOf(kEngineNames, engine); }
std::string_view DraftPoolName(DraftPool pool) { return kv::DraftModeName(pool); }
std::string_view RoutingPolicyName(RoutingPolicy policy) { return NameOf(kPolicyNames, policy); }
std::string_view CommTransportName(CommTransport transport) {
  return NameOf(kTransportNames, transport);
}

std::string_view TransferTransportName(TransferTransport transport) {
  return NameOf(kTransferTransportNames, transport);
}

absl::StatusOr<InstanceRole> ParseInstanceRole(std::string_view name) {
  std::vector<std::string_view> names;
  for (InstanceRole role :
       {InstanceRole::kAggregated, InstanceRole::kContext, InstanceRole::kGeneration}) {
    if (name == InstanceRoleName(role)) return role;
    names.push_back(InstanceRoleName(role));
  }
  return UnknownName(names, name);
}
absl::StatusOr<EngineKind> ParseEngineKind(std::string_view name) {
  return ParseName(kEngineNames, name);
}
absl::StatusOr<DummyPolicy> ParseDummyPolicy(std::string_view name) {
  std::vector<std::string_view> names;
  for (DummyPolicy policy : {DummyPolicy::kReserved, DummyPolicy::kCompat}) {
    if (name == DummyPolicyName(policy)) return policy;
    names.push_back(DummyPolicyName(policy));
  }
  return UnknownName(names, name);
}
absl::StatusOr<CapacityPolicy> ParseCapacityPolicy(std::string_view name) {
  std::vector<std::string_view> names;
  for (CapacityPolicy policy :
       {CapacityPolicy::kMaxUtilization, CapacityPolicy::kGuaranteedNoEvict}) {
    if (name == CapacityPolicyName(policy)) return policy;
    names.push_back(CapacityPolicyName(policy));
  }
  return UnknownName(names, name);
}
absl::StatusOr<DraftPool> ParseDraftPool(std::string_view name) {
  std::vector<std::string_view> names;
  for (DraftPool pool : {DraftPool::kNone, DraftPool::kPaired, DraftPool::kUnpaired}) {
    if (name == DraftPoolName(pool)) return pool;
    names.push_back(DraftPoolName(pool));
  }
  return UnknownName(names, name);
}
absl::StatusOr<RoutingPolicy> ParseRoutingPolicy(std::string_view name) {
  return ParseName(kPolicyNames, name);
}
absl::StatusOr<CommTransport> ParseCommTransport(std::string_view name) {
  return ParseName(kTransportNames, name);
}

absl::StatusOr<TransferTransport> ParseTransferTransport(std::string_view name) {
  return ParseName(kTransferTransportNames, name);
}

absl::StatusOr<int64_t> AutoKvNumBlocks(const KvSettings& kv, std::string_view field,
                                        uint64_t free_bytes, uint64_t block_bytes) {
  if (block_bytes == 0) {
    return absl::InvalidArgumentError(fmt::format("{}: auto with a block of 0 bytes", field));
  }
  const long double budget = static_cast<long double>(free_bytes) * kv.free_memory_fraction;
  const int64_t blocks = static_cast<int64_t>(budget / static_cast<long double>(block_bytes));
  if (blocks < 1) {
    return absl::ResourceExhaustedError(fmt::format(
        "{}: auto gives no block: {} of {} free bytes is less than one block of {} bytes", field,
        kv.free_memory_fraction, free_bytes, block_bytes));
  }
  return blocks;
}

absl::Status ValidateHostPort(std::string_view field, std::string_view address) {
  const absl::StatusOr<HostPort> parsed =
      ParseHostPort(absl::string_view(address.data(), address.size()));
  if (parsed.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{}: {}", field, std::string(parsed.status().message())));
}

absl::Status DeploymentConfig::Validate() const {
  Problems problems;
  problems.Name("model.name", model.name, /*allow_dot=*/true);
  if (model.path.empty()) problems.Add("model.path", "is required");
  // The names of runtime/router/tool_calls/parser_family.h's ParserFamilyFromNames (its
  // test checks that it takes each of these).
  if (!absl::c_linear_search(kToolCallParsers, model.tool_call_parser)) {
    problems.Add("model.tool_call_parser",
                 fmt::format("'{}' is not one of {}", model.tool_call_parser,
                             fmt::join(kToolCallParsers, ", ")));
  }
  if (!absl::c_linear_search(kReasoningParsers, model.reasoning_parser)) {
    problems.Add("model.reasoning_parser",
                 fmt::format("'{}' is not one of {}", model.reasoning_parser,
                             fmt::join(kReasoningParsers, ", ")));
  }

  problems.HostPort("router.http_listen", router.http_listen);
  problems.HostPort("router.grpc_listen", router.grpc_listen);
  if (router.https_cert_file.empty() != router.https_key_file.empty()) {
    problems.Add(router.https_cert_file.empty() ? "router.https_cert_file" : "router.https_key_file",
                 router.https_cert_file.empty() ? "is required with router.https_key_file"
                                                : "is required with router.https_cert_file");
  }
  if (!router.https_ca_file.empty() && router.https_cert_file.empty()) {
    problems.Add("router.https_ca_file", "is only used with router.https_cert_file (HTTPS)");
  }
  problems.AtLeast("router.heartbeat_interval_ms", router.heartbeat_interval_ms, 1);
  if (router.heartbeat_timeout_ms <= router.heartbeat_interval_ms) {
    problems.Add("router.heartbeat_timeout_ms",
                 absl::StrCat("must be > heartbeat_interval_ms (", router.heartbeat_interval_ms,
                              "), got ", router.heartbeat_timeout_ms));
  }
  problems.AtLeast("router.health_check_interval_ms", router.health_check_interval_ms, 1);
  problems.AtLeast("router.request_timeout_s", router.request_timeout_s, 1);
  problems.AtLeast("router.migration_limit", router.migration_limit, 0);
  problems.InRange("router.kv_index_max_keys", router.kv_index_max_keys, 1, int64_t{1} << 32);
  for (const auto& [path, weight] : {std::pair{"router.kv_prefix_weight", router.kv_prefix_weight},
                                     std::pair{"router.kv_load_weight", router.kv_load_weight},
                                     std::pair{"router.kv_free_weight", router.kv_free_weight}}) {
    if (!(weight >= 0 && weight <= 1e6)) {
      problems.Add(path, absl::StrCat("must be in [0, 1e6], got ", weight));
    }
  }
  for (const auto& [path, weight] :
       {std::pair{"router.kv_host_hit_weight", router.kv_host_hit_weight},
        std::pair{"router.kv_disk_hit_weight", router.kv_disk_hit_weight}}) {
    if (!(weight >= 0 && weight <= 1)) {
      problems.Add(path, absl::StrCat("must be in [0, 1] (a device hit is 1), got ", weight));
    }
  }
  problems.InRange("router.kv_event_interval_ms", router.kv_event_interval_ms, 1, 60000);
  problems.AtLeast("router.max_prompt_tokens", router.max_prompt_tokens, 1);
  problems.InRange("router.http_threads", router.http_threads, 1, 256);
  problems.InRange("router.max_concurrent_requests", router.max_concurrent_requests, 0, 1 << 20);
  problems.AtLeast("router.max_queued_requests", router.max_queued_requests, 0);
  problems.InRange("router.max_request_body_bytes", router.max_request_body_bytes, 1, 1LL << 30);
  problems.InRange("router.max_header_bytes", router.max_header_bytes, 1024, 16 << 20);
  problems.InRange("router.max_header_count", router.max_header_count, 1, 10000);
  problems.AtLeast("router.max_connections", router.max_connections, 0);
  problems.InRange("router.http_first_request_timeout_ms", router.http_first_request_timeout_ms, 1,
                   3600000);
  problems.InRange("router.http_idle_timeout_ms", router.http_idle_timeout_ms, 1, 3600000);
  problems.InRange("router.http_read_timeout_ms", router.http_read_timeout_ms, 1, 3600000);
  problems.InRange("router.http_write_timeout_ms", router.http_write_timeout_ms, 1, 3600000);
  // An HTTP request holds no gRPC thread; RouterService.Generate calls are held to
  // grpc_max_threads - kRouterGrpcReservedThreads whatever max_concurrent_requests is.
  problems.InRange("router.grpc_max_threads", router.grpc_max_threads,
                   kRouterGrpcReservedThreads, 1 << 16);

  if (instances.empty()) problems.Add("instances", "must list at least one instance");
  absl::flat_hash_set<std::string> names;
  bool has_context = false;
  bool has_generation = false;
  for (size_t i = 0; i < instances.size(); ++i) {
    const InstanceConfig& instance = instances[i];
    const std::string prefix = absl::StrCat("instances[", i, "]");
    ValidateInstance(instance, prefix, problems);
    if (!instance.name.empty() && !names.insert(instance.name).second) {
      problems.Add(prefix + ".name", absl::StrCat("duplicate instance name '", instance.name, "'"));
    }
    has_context |= instance.role == InstanceRole::kContext;
    has_generation |= instance.role == InstanceRole::kGeneration;
    if (model.draft_path.empty()) {
      if (HasSpeculativeBlock(instance.speculative)) {
        if (instance.speculative.method == spec::Method::kDraftModel) {
          problems.Add("model.draft_path",
                       absl::StrCat("is required: ", prefix, ".speculative.method is draft_model"));
        }
      } else if (instance.executor.spec_k > 0) {
        problems.Add("model.draft_path", absl::StrCat("is required: ", prefix,
                                                      ".executor.spec_k is ",
                                                      instance.executor.spec_k));
      }
    }
  }
  ValidateDraftKvSources(instances, problems);
  ValidatePlacement(placement, instances, problems);
  ValidateSecurity(security, problems);
  if (has_context != has_generation) {
    problems.Add("instances", has_context
                                  ? "a context instance needs at least one generation instance"
                                  : "a generation instance needs at least one context instance");
  }
  return problems.ToStatus();
}

spec::SpeculativeConfig EffectiveSpeculative(const InstanceConfig& instance) {
  if (HasSpeculativeBlock(instance.speculative) || instance.executor.spec_k <= 0) {
    return instance.speculative;
  }
  spec::SpeculativeConfig alias;
  alias.method = spec::Method::kDraftModel;
  alias.num_draft_tokens = static_cast<int32_t>(instance.executor.spec_k);
  return alias;
}

const InstanceConfig* DeploymentConfig::FindInstance(std::string_view name) const {
  for (const InstanceConfig& instance : instances) {
    if (instance.name == name) return &instance;
  }
  return nullptr;
}

bool UsesUcx(const DeploymentConfig& config) {
  for (const InstanceConfig& instance : config.instances) {
    if (instance.transfer.transport == TransferTransport::kUcx) return true;
  }
  return false;
}

}  // namespace lockstep::config
