#include "runtime/config/config_yaml.h"

#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/config/cuda_settings.h"
#include "spec_decode/speculative_config.h"
#include "yaml-cpp/yaml.h"

namespace lockstep::config {
namespace {

std::string LineOf(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return "";
  return absl::StrCat(" (line ", mark.line + 1, ")");
}

// Reads the fields of one YAML mapping into a struct. Records an error for each bad
// field and, in Finish(), for each key no reader asked for.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path, std::vector<std::string>& errors)
      : node_(node), path_(std::move(path)), errors_(errors) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) {
      Error(path_, "must be a mapping", node_);
      valid_ = false;
    }
  }

  // The child node at `key` (undefined when absent); marks the key as known.
  YAML::Node Child(const std::string& key) {
    known_.insert(key);
    if (!valid_ || !node_ || node_.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
    return node_[key];
  }

  std::string PathOf(const std::string& key) const {
    return path_.empty() ? key : absl::StrCat(path_, ".", key);
  }

  void String(const std::string& key, std::string* out) {
    YAML::Node value = Child(key);
    if (!value.IsDefined()) return;
    if (value.IsNull()) {
      out->clear();
    } else if (value.IsScalar()) {
      *out = value.Scalar();
    } else {
      Error(PathOf(key), "must be a string", value);
    }
  }

  void Int(const std::string& key, int64_t* out) {
    YAML::Node value = Child(key);
    if (!value.IsDefined()) return;
    int64_t parsed = 0;
    if (!value.IsScalar() || !absl::SimpleAtoi(value.Scalar(), &parsed)) {
      Error(PathOf(key), absl::StrCat("must be an integer, got ", Describe(value)), value);
      return;
    }
    *out = parsed;
  }

  void Int(const std::string& key, int32_t* out) {
    int64_t parsed = *out;
    Int(key, &parsed);
    if (parsed < std::numeric_limits<int32_t>::min() ||
        parsed > std::numeric_limits<int32_t>::max()) {
      Error(PathOf(key), absl::StrCat("must be a 32-bit integer, got ", parsed), Child(key));
      return;
    }
    *out = static_cast<int32_t>(parsed);
  }

  void Double(const std::string& key, double* out) {
    YAML::Node value = Child(key);
    if (!value.IsDefined()) return;
    double parsed = 0;
    if (!value.IsScalar() || !absl::SimpleAtod(value.Scalar(), &parsed)) {
      Error(PathOf(key), absl::StrCat("must be a number, got ", Describe(value)), value);
      return;
    }
    *out = parsed;
  }

  void Bool(const std::string& key, bool* out) {
    YAML::Node value = Child(key);
    if (!value.IsDefined()) return;
    if (value.IsScalar() && (value.Scalar() == "true" || value.Scalar() == "false")) {
      *out = value.Scalar() == "true";
      return;
    }
    Error(PathOf(key), absl::StrCat("must be true or false, got ", Describe(value)), value);
  }

  // A sequence of integers, e.g. [1, 2, 4].
  void IntList(const std::string& key, std::vector<int64_t>* out) {
    YAML::Node value = Child(key);
    if (!value.IsDefined() || value.IsNull()) return;
    if (!value.IsSequence()) {
      Error(PathOf(key), absl::StrCat("must be a list of integers, got ", Describe(value)), value);
      return;
    }
    out->clear();
    for (size_t i = 0; i < value.size(); ++i) {
      int64_t parsed = 0;
      if (!value[i].IsScalar() || !absl::SimpleAtoi(value[i].Scalar(), &parsed)) {
        Error(absl::StrCat(PathOf(key), "[", i, "]"),
              absl::StrCat("must be an integer, got ", Describe(value[i])), value[i]);
        continue;
      }
      out->push_back(parsed);
    }
  }

  template <typename Enum>
  void Enumerated(const std::string& key, Enum* out,
                  absl::StatusOr<Enum> (*parse)(std::string_view)) {
    YAML::Node value = Child(key);
    if (!value.IsDefined()) return;
    if (!value.IsScalar()) {
      Error(PathOf(key), absl::StrCat("must be a name, got ", Describe(value)), value);
      return;
    }
    absl::StatusOr<Enum> parsed = parse(value.Scalar());
    if (!parsed.ok()) {
      Error(PathOf(key), std::string(parsed.status().message()), value);
      return;
    }
    *out = *parsed;
  }

  // A required key that is absent is an error.
  void Require(const std::string& key) {
    if (valid_ && node_ && node_.IsMap() && !node_[key].IsDefined()) {
      errors_.push_back(absl::StrCat(PathOf(key), ": is required", LineOf(node_)));
    }
  }

  void Finish() {
    if (!valid_ || !node_ || !node_.IsMap()) return;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
      if (!known_.contains(key)) {
        Error(PathOf(key), "unknown key", it->first);
      }
    }
  }

  void Error(const std::string& path, const std::string& message, const YAML::Node& at) {
    errors_.push_back(absl::StrCat(path, ": ", message, LineOf(at)));
  }

 private:
  static std::string Describe(const YAML::Node& value) {
    if (value.IsNull()) return "null";
    if (value.IsSequence()) return "a sequence";
    if (value.IsMap()) return "a mapping";
    return absl::StrCat("'", value.Scalar(), "'");
  }

  const YAML::Node node_;
  std::string path_;
  std::vector<std::string>& errors_;
  absl::flat_hash_set<std::string> known_;
  bool valid_ = true;
};

void ReadModel(MapReader& reader, ModelConfig& model) {
  reader.String("name", &model.name);
  reader.String("path", &model.path);
  reader.String("draft_path", &model.draft_path);
  reader.String("tool_call_parser", &model.tool_call_parser);
  reader.String("reasoning_parser", &model.reasoning_parser);
  reader.Finish();
}

void ReadRouter(MapReader& reader, RouterConfig& router) {
  reader.String("http_listen", &router.http_listen);
  reader.String("grpc_listen", &router.grpc_listen);
  reader.String("https_cert_file", &router.https_cert_file);
  reader.String("https_key_file", &router.https_key_file);
  reader.String("https_ca_file", &router.https_ca_file);
  reader.Enumerated("policy", &router.policy, &ParseRoutingPolicy);
  reader.Int("kv_index_max_keys", &router.kv_index_max_keys);
  reader.Double("kv_prefix_weight", &router.kv_prefix_weight);
  reader.Double("kv_load_weight", &router.kv_load_weight);
  reader.Double("kv_free_weight", &router.kv_free_weight);
  reader.Double("kv_host_hit_weight", &router.kv_host_hit_weight);
  reader.Double("kv_disk_hit_weight", &router.kv_disk_hit_weight);
  reader.Int("kv_event_interval_ms", &router.kv_event_interval_ms);
  reader.String("api_key", &router.api_key);
  reader.String("api_keys_file", &router.api_keys_file);
  reader.Int("heartbeat_interval_ms", &router.heartbeat_interval_ms);
  reader.Int("heartbeat_timeout_ms", &router.heartbeat_timeout_ms);
  reader.Int("health_check_interval_ms", &router.health_check_interval_ms);
  reader.Int("request_timeout_s", &router.request_timeout_s);
  reader.Int("migration_limit", &router.migration_limit);
  reader.Int("max_prompt_tokens", &router.max_prompt_tokens);
  reader.Int("http_threads", &router.http_threads);
  reader.Int("max_concurrent_requests", &router.max_concurrent_requests);
  reader.Int("max_queued_requests", &router.max_queued_requests);
  reader.Int("max_request_body_bytes", &router.max_request_body_bytes);
  reader.Int("max_header_bytes", &router.max_header_bytes);
  reader.Int("max_header_count", &router.max_header_count);
  reader.Int("max_connections", &router.max_connections);
  reader.Int("grpc_max_threads", &router.grpc_max_threads);
  reader.Int("http_first_request_timeout_ms", &router.http_first_request_timeout_ms);
  reader.Int("http_idle_timeout_ms", &router.http_idle_timeout_ms);
  reader.Int("http_read_timeout_ms", &router.http_read_timeout_ms);
  reader.Int("http_write_timeout_ms", &router.http_write_timeout_ms);
  reader.Bool("api_key_for_health_and_metrics", &router.api_key_for_health_and_metrics);
  reader.Finish();
}

void ReadInstance(MapReader& reader, InstanceConfig& instance, std::vector<std::string>& errors) {
  reader.Require("name");
  reader.Require("role");
  reader.String("name", &instance.name);
  reader.Enumerated("role", &instance.role, &ParseInstanceRole);
  reader.Int("world_size", &instance.world_size);
  reader.Enumerated("engine", &instance.engine, &ParseEngineKind);
  reader.String("leader_address", &instance.leader_address);

  MapReader executor(reader.Child("executor"), reader.PathOf("executor"), errors);
  ExecutorSettings& e = instance.executor;
  executor.Int("max_batch_size", &e.max_batch_size);
  executor.Int("max_num_tokens", &e.max_num_tokens);
  executor.Int("max_num_active_requests", &e.max_num_active_requests);
  executor.Enumerated("dummy_policy", &e.dummy_policy, &ParseDummyPolicy);
  executor.Enumerated("capacity_policy", &e.capacity_policy, &ParseCapacityPolicy);
  executor.Int("spec_k", &e.spec_k);
  executor.Enumerated("draft_pool", &e.draft_pool, &ParseDraftPool);
  executor.Int("chunk_size", &e.chunk_size);
  executor.Int("step_timeout_ms", &e.step_timeout_ms);
  executor.Int("blas_threads", &e.blas_threads);
  executor.Bool("audit_every_step", &e.audit_every_step);
  executor.Finish();

  MapReader kv(reader.Child("kv"), reader.PathOf("kv"), errors);
  kv.Int("tokens_per_block", &instance.kv.tokens_per_block);
  if (YAML::Node n = kv.Child("num_blocks");
      n.IsDefined() && n.IsScalar() && n.Scalar() == "auto") {
    instance.kv.num_blocks_auto = true;
  } else {
    kv.Int("num_blocks", &instance.kv.num_blocks);
  }
  kv.Double("free_memory_fraction", &instance.kv.free_memory_fraction);
  kv.Int("draft_num_blocks", &instance.kv.draft_num_blocks);
  kv.Bool("prefix_reuse", &instance.kv.prefix_reuse);
  kv.Int("host_tier_bytes", &instance.kv.host_tier_bytes);
  kv.String("disk_tier_path", &instance.kv.disk_tier_path);
  kv.Int("disk_tier_bytes", &instance.kv.disk_tier_bytes);
  kv.Finish();

  MapReader transfer(reader.Child("transfer"), reader.PathOf("transfer"), errors);
  transfer.Int("deadline_ms", &instance.transfer.deadline_ms);
  transfer.Int("lease_ms", &instance.transfer.lease_ms);
  transfer.Bool("tcp_data_plane", &instance.transfer.tcp_data_plane);
  transfer.Enumerated("transport", &instance.transfer.transport, &ParseTransferTransport);
  transfer.Finish();
  // `tcp_data_plane: false` alone is the older spelling of `transport: grpc`.
  if (!instance.transfer.tcp_data_plane &&
      instance.transfer.transport == TransferTransport::kTcp) {
    instance.transfer.transport = TransferTransport::kGrpc;
  }
  if (instance.transfer.transport == TransferTransport::kGrpc) {
    instance.transfer.tcp_data_plane = false;
  }

  MapReader speculative(reader.Child("speculative"), reader.PathOf("speculative"), errors);
  spec::SpeculativeConfig& s = instance.speculative;
  speculative.Enumerated("method", &s.method, &spec::ParseMethod);
  speculative.Int("num_draft_tokens", &s.num_draft_tokens);
  if (YAML::Node k = speculative.Child("k"); k.IsDefined()) {  // num_draft_tokens, short
    if (speculative.Child("num_draft_tokens").IsDefined()) {
      speculative.Error(speculative.PathOf("k"),
                        "is an alias of num_draft_tokens: give one, not both", k);
    } else {
      speculative.Int("k", &s.num_draft_tokens);
    }
  }
  speculative.Bool("dynamic", &s.dynamic);
  speculative.Int("ngram_max", &s.ngram_max);
  speculative.Finish();

  MapReader comm(reader.Child("comm"), reader.PathOf("comm"), errors);
  comm.Enumerated("vote_transport", &instance.comm.vote_transport, &ParseCommTransport);
  comm.Enumerated("engine_transport", &instance.comm.engine_transport, &ParseCommTransport);
  comm.Finish();

  MapReader cuda(reader.Child("cuda"), reader.PathOf("cuda"), errors);
  cuda.Enumerated("dtype", &instance.cuda.dtype, &ParseCudaDtype);
  cuda.Double("kv_fraction", &instance.cuda.kv_fraction);
  cuda.IntList("graph_batch_sizes", &instance.cuda.graph_batch_sizes);
  cuda.Bool("batch_invariant", &instance.cuda.batch_invariant);
  cuda.Bool("graphs", &instance.cuda.graphs);
  cuda.Finish();

  MapReader eplb(reader.Child("eplb"), reader.PathOf("eplb"), errors);
  eplb.String("expert_placement", &instance.eplb.expert_placement);
  eplb.Int("load_window", &instance.eplb.load_window);
  eplb.String("load_dump", &instance.eplb.load_dump);
  eplb.Int("rebalance_windows", &instance.eplb.rebalance_windows);
  eplb.Int("redundant_slots", &instance.eplb.redundant_slots);
  eplb.Finish();
  reader.Finish();
}

void ReadPlacement(MapReader& reader, PlacementConfig& placement) {
  reader.Int("gpus_per_node", &placement.gpus_per_node);
  reader.Int("nodes_per_instance", &placement.nodes_per_instance);
  reader.Bool("numa_bind", &placement.numa_bind);
  reader.String("topology_key", &placement.topology_key);
  reader.Bool("compute_domain", &placement.compute_domain);
  const YAML::Node env = reader.Child("env");
  if (env.IsDefined() && !env.IsNull()) {
    if (!env.IsMap()) {
      reader.Error(reader.PathOf("env"), "must be a mapping of variable names to values", env);
    } else {
      for (auto it = env.begin(); it != env.end(); ++it) {
        const std::string name = it->first.IsScalar() ? it->first.Scalar() : "?";
        if (!it->second.IsScalar()) {
          reader.Error(absl::StrCat(reader.PathOf("env"), ".", name), "must be a string",
                       it->second);
          continue;
        }
        placement.env.emplace_back(name, it->second.Scalar());
      }
    }
  }
  const YAML::Node rdma = reader.Child("rdma_resources");
  if (rdma.IsDefined() && !rdma.IsNull()) {
    if (!rdma.IsMap()) {
      reader.Error(reader.PathOf("rdma_resources"), "must be a mapping of resource names to counts",
                   rdma);
    } else {
      for (auto it = rdma.begin(); it != rdma.end(); ++it) {
        const std::string name = it->first.IsScalar() ? it->first.Scalar() : "?";
        int64_t count = 0;
        if (!it->second.IsScalar() || !absl::SimpleAtoi(it->second.Scalar(), &count)) {
          reader.Error(absl::StrCat(reader.PathOf("rdma_resources"), ".", name),
                       "must be an integer", it->second);
          continue;
        }
        placement.rdma_resources.emplace_back(name, count);
      }
    }
  }
  reader.Finish();
}

void ReadSecurity(MapReader& reader, SecurityConfig& security) {
  reader.String("cluster_token_file", &security.cluster_token_file);
  reader.String("tls_cert_file", &security.tls_cert_file);
  reader.String("tls_key_file", &security.tls_key_file);
  reader.String("tls_ca_file", &security.tls_ca_file);
  reader.String("tls_server_name", &security.tls_server_name);
  reader.Finish();
}

std::string Resolve(std::string_view base_dir, const std::string& path) {
  if (path.empty() || base_dir.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(std::string(base_dir)) / p).lexically_normal().string();
}

absl::StatusOr<DeploymentConfig> ParseUnchecked(std::string_view yaml_text,
                                                std::string_view base_dir,
                                                const std::string& source) {
  const YAML::Node root = YAML::Load(std::string(yaml_text));
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the top level must be a mapping with model, router, instances"));
  }
  std::vector<std::string> errors;
  DeploymentConfig config;
  MapReader top(root, "", errors);
  top.Require("model");
  top.Require("instances");
  MapReader model(top.Child("model"), "model", errors);
  ReadModel(model, config.model);
  MapReader router(top.Child("router"), "router", errors);
  ReadRouter(router, config.router);
  MapReader placement(top.Child("placement"), "placement", errors);
  ReadPlacement(placement, config.placement);
  MapReader security(top.Child("security"), "security", errors);
  ReadSecurity(security, config.security);
  const YAML::Node instances = top.Child("instances");
  if (instances.IsDefined() && !instances.IsNull()) {
    if (!instances.IsSequence()) {
      top.Error("instances", "must be a sequence", instances);
    } else {
      for (size_t i = 0; i < instances.size(); ++i) {
        MapReader reader(instances[i], absl::StrCat("instances[", i, "]"), errors);
        ReadInstance(reader, config.instances.emplace_back(), errors);
      }
    }
  }
  top.Finish();
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", absl::StrJoin(errors, "\n")));
  }
  config.model.path = Resolve(base_dir, config.model.path);
  config.model.draft_path = Resolve(base_dir, config.model.draft_path);
  config.router.api_keys_file = Resolve(base_dir, config.router.api_keys_file);
  for (std::string* file : {&config.router.https_cert_file, &config.router.https_key_file,
                            &config.router.https_ca_file, &config.security.cluster_token_file,
                            &config.security.tls_cert_file, &config.security.tls_key_file,
                            &config.security.tls_ca_file}) {
    *file = Resolve(base_dir, *file);
  }
  return config;
}

}  // namespace

absl::StatusOr<DeploymentConfig> ParseDeploymentConfig(std::string_view yaml_text,
                                                       std::string_view base_dir,
                                                       std::string_view source_name) {
  const std::string source(source_name);
  absl::StatusOr<DeploymentConfig> config;
  try {
    config = ParseUnchecked(yaml_text, base_dir, source);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": invalid YAML: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
  if (!config.ok()) return config.status();
  if (absl::Status status = config->Validate(); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", status.message()));
  }
  return config;
}

absl::StatusOr<DeploymentConfig> LoadDeploymentConfig(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("cannot read config file '", path, "'"));
  }
  std::stringstream text;
  text << file.rdbuf();
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) absolute = path;
  return ParseDeploymentConfig(text.str(), absolute.parent_path().string(), path);
}

}  // namespace lockstep::config
