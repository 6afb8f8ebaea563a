#include "runtime/config/config_yaml.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/deployment_config.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::config {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kMinimal[] = R"(
model: {name: tiny-moe, path: models/tiny-moe}
instances:
  - {name: agg0, role: aggregated, world_size: 2}
)";

TEST(ConfigYamlTest, RouterBoundsAreRead) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      std::string(kMinimal) +
          "router: {max_queued_requests: 7, max_request_body_bytes: 4096, max_header_bytes: "
          "2048, max_header_count: 9, max_connections: 10, http_idle_timeout_ms: 11, "
          "http_first_request_timeout_ms: 14, "
          "http_read_timeout_ms: 12, http_write_timeout_ms: 13, grpc_max_threads: 64, "
          "api_key_for_health_and_metrics: true}\n",
      "");
  ASSERT_THAT(config, IsOk());
  const RouterConfig& router = config->router;
  EXPECT_EQ(router.max_queued_requests, 7);
  EXPECT_EQ(router.max_request_body_bytes, 4096);
  EXPECT_EQ(router.max_header_bytes, 2048);
  EXPECT_EQ(router.max_header_count, 9);
  EXPECT_EQ(router.max_connections, 10);
  EXPECT_EQ(router.http_idle_timeout_ms, 11);
  EXPECT_EQ(router.http_first_request_timeout_ms, 14);
  EXPECT_EQ(router.http_read_timeout_ms, 12);
  EXPECT_EQ(router.http_write_timeout_ms, 13);
  EXPECT_EQ(router.grpc_max_threads, 64);
  EXPECT_TRUE(router.api_key_for_health_and_metrics);
  // Defaults: open /health and /metrics, a 16 MiB body.
  absl::StatusOr<DeploymentConfig> defaults = ParseDeploymentConfig(kMinimal, "");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_FALSE(defaults->router.api_key_for_health_and_metrics);
  EXPECT_EQ(defaults->router.max_request_body_bytes, 16 << 20);
}

TEST(ConfigYamlTest, MinimalFileGetsDefaults) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(kMinimal, "");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model.path, "models/tiny-moe");
  EXPECT_EQ(config->router.policy, RoutingPolicy::kRoundRobin);
  EXPECT_EQ(config->router.heartbeat_timeout_ms, 2000);
  ASSERT_EQ(config->instances.size(), 1u);
  EXPECT_EQ(config->instances[0].world_size, 2);
  EXPECT_EQ(config->instances[0].executor.max_batch_size, 8);
  EXPECT_EQ(config->instances[0].executor.dummy_policy, DummyPolicy::kReserved);
  EXPECT_EQ(config->instances[0].executor.capacity_policy, CapacityPolicy::kMaxUtilization);
  EXPECT_TRUE(config->instances[0].kv.prefix_reuse);
  EXPECT_TRUE(config->instances[0].transfer.tcp_data_plane);
  EXPECT_EQ(config->instances[0].comm.vote_transport, CommTransport::kGloo);
  EXPECT_EQ(config->instances[0].comm.engine_transport, CommTransport::kGloo);
}

TEST(ConfigYamlTest, CapacityPolicyIsRead) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      "model: {name: m, path: p}\n"
      "instances: [{name: a, role: aggregated, executor: {capacity_policy: "
      "guaranteed_no_evict}}]\n",
      "");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->instances[0].executor.capacity_policy, CapacityPolicy::kGuaranteedNoEvict);
}

TEST(ConfigYamlTest, OutputParsersAreReadAndChecked) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(R"(
model: {name: m, path: /m, tool_call_parser: hermes, reasoning_parser: none}
instances: [{name: a, role: aggregated}]
)", "");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model.tool_call_parser, "hermes");
  EXPECT_EQ(config->model.reasoning_parser, "none");
  absl::StatusOr<DeploymentConfig> defaults = ParseDeploymentConfig(R"(
model: {name: m, path: /m}
instances: [{name: a, role: aggregated}]
)", "");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->model.tool_call_parser, "auto");
  EXPECT_EQ(defaults->model.reasoning_parser, "auto");
  EXPECT_THAT(ParseDeploymentConfig(R"(
model: {name: m, path: /m, tool_call_parser: hermess}
instances: [{name: a, role: aggregated}]
)", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.tool_call_parser: 'hermess' is not one of auto, none, "
                                 "hermes, qwen, llama3_json, deepseek_v3, mistral")));
  EXPECT_THAT(ParseDeploymentConfig(R"(
model: {name: m, path: /m, reasoning_parser: maybe}
instances: [{name: a, role: aggregated}]
)", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.reasoning_parser: 'maybe' is not one of")));
}

TEST(ConfigYamlTest, RelativeModelPathsResolveAgainstTheConfigDirectory) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      R"(
model: {name: m, path: ../../models/m, draft_path: /abs/draft}
instances: [{name: a, role: aggregated}]
)",
      "/srv/deploy/local");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model.path, "/srv/models/m");
  EXPECT_EQ(config->model.draft_path, "/abs/draft");
}

TEST(ConfigYamlTest, HttpsFilesAreReadAndResolveAgainstTheConfigDirectory) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      std::string(kMinimal) +
          "router: {https_cert_file: tls/router.pem, https_key_file: /secrets/router.key, "
          "https_ca_file: tls/ca.pem}\n",
      "/srv/deploy");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->router.https_cert_file, "/srv/deploy/tls/router.pem");
  EXPECT_EQ(config->router.https_key_file, "/secrets/router.key");
  EXPECT_EQ(config->router.https_ca_file, "/srv/deploy/tls/ca.pem");
  absl::StatusOr<DeploymentConfig> defaults = ParseDeploymentConfig(kMinimal, "/srv/deploy");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->router.https_cert_file, "");
  EXPECT_THAT(ParseDeploymentConfig(std::string(kMinimal) +
                                        "router: {https_cert_file: tls/router.pem}\n",
                                    ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("router.https_key_file")));
}

TEST(ConfigYamlTest, SecurityFilesAndApiKeysFileResolveAgainstTheConfigDirectory) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      R"(
model: {name: m, path: /models/m}
router: {api_keys_file: secrets/api_keys}
security:
  cluster_token_file: secrets/cluster_token
  tls_cert_file: /tls/node.pem
  tls_key_file: tls/node.key
  tls_ca_file: tls/ca.pem
  tls_server_name: lockstep.internal
instances: [{name: a, role: aggregated}]
)",
      "/srv/deploy");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->router.api_keys_file, "/srv/deploy/secrets/api_keys");
  const SecurityConfig& security = config->security;
  EXPECT_EQ(security.cluster_token_file, "/srv/deploy/secrets/cluster_token");
  EXPECT_EQ(security.tls_cert_file, "/tls/node.pem");
  EXPECT_EQ(security.tls_key_file, "/srv/deploy/tls/node.key");
  EXPECT_EQ(security.tls_ca_file, "/srv/deploy/tls/ca.pem");
  EXPECT_EQ(security.tls_server_name, "lockstep.internal");
  // Without a base directory (render k8s) the names stay as written; none by default.
  config = ParseDeploymentConfig(
      "model: {name: m, path: p}\nsecurity: {cluster_token_file: t}\n"
      "instances: [{name: a, role: aggregated}]\n",
      "");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->security.cluster_token_file, "t");
  absl::StatusOr<DeploymentConfig> defaults = ParseDeploymentConfig(kMinimal, "");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->security, SecurityConfig());
  EXPECT_EQ(defaults->router.api_keys_file, "");
}

TEST(ConfigYamlTest, AggregatedExampleParses) {
  absl::StatusOr<DeploymentConfig> config = LoadDeploymentConfig("deploy/local/agg_dep2.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model.name, "tiny-moe");
  EXPECT_THAT(config->model.path, HasSubstr("models/tiny-moe"));
  EXPECT_EQ(config->model.path.front(), '/');  // resolved
  ASSERT_EQ(config->instances.size(), 1u);
  EXPECT_EQ(config->instances[0].role, InstanceRole::kAggregated);
  EXPECT_EQ(config->instances[0].world_size, 2);
  EXPECT_EQ(config->instances[0].executor.spec_k, 0);
  EXPECT_FALSE(EffectiveSpeculative(config->instances[0]).enabled());
  EXPECT_EQ(config->instances[0].comm.vote_transport, CommTransport::kAuto);
  EXPECT_EQ(config->instances[0].comm.engine_transport, CommTransport::kAuto);
}

// The KV-tier measurement's deployment (docs/perf/kv_tiers.md): a quarter of the
// working set on the device, a host tier below, and the no-evict admission.
TEST(ConfigYamlTest, KvTiersExampleParses) {
  absl::StatusOr<DeploymentConfig> config =
      LoadDeploymentConfig("deploy/local/agg_dep2_kv_tiers.yaml");
  ASSERT_THAT(config, IsOk());
  ASSERT_EQ(config->instances.size(), 1u);
  const InstanceConfig& agg = config->instances[0];
  EXPECT_EQ(agg.role, InstanceRole::kAggregated);
  EXPECT_EQ(agg.executor.capacity_policy, CapacityPolicy::kGuaranteedNoEvict);
  EXPECT_EQ(agg.kv.num_blocks, 176);
  EXPECT_EQ(agg.kv.host_tier_bytes, 48 << 20);
  EXPECT_TRUE(agg.kv.disk_tier_path.empty());
  EXPECT_EQ(config->router.policy, RoutingPolicy::kKvAware);
}

TEST(ConfigYamlTest, CudaExampleParses) {
  absl::StatusOr<DeploymentConfig> config = LoadDeploymentConfig("deploy/local/agg_cuda_tiny.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model.name, "tiny");
  EXPECT_THAT(config->model.path, HasSubstr("models/tiny"));
  ASSERT_EQ(config->instances.size(), 1u);
  const InstanceConfig& gpu = config->instances[0];
  EXPECT_EQ(gpu.engine, EngineKind::kCuda);
  EXPECT_EQ(gpu.role, InstanceRole::kAggregated);
  EXPECT_EQ(gpu.world_size, 1);
  EXPECT_EQ(gpu.cuda.dtype, CudaDtype::kBf16);
  EXPECT_TRUE(gpu.cuda.graphs);
}

TEST(ConfigYamlTest, CudaDisaggregatedExampleParses) {
  absl::StatusOr<DeploymentConfig> config =
      LoadDeploymentConfig("deploy/local/disagg_cuda_ctx_dep2_gen_dep2.yaml");
  ASSERT_THAT(config, IsOk());
  ASSERT_EQ(config->instances.size(), 2u);
  for (const InstanceConfig& instance : config->instances) {
    EXPECT_EQ(instance.engine, EngineKind::kCuda);
    EXPECT_EQ(instance.world_size, 2);
    EXPECT_EQ(instance.comm.engine_transport, CommTransport::kNccl);
    EXPECT_EQ(instance.speculative.method, spec::Method::kDraftModel);
    EXPECT_EQ(instance.cuda.dtype, CudaDtype::kBf16);
  }
  EXPECT_EQ(config->instances[0].role, InstanceRole::kContext);
  EXPECT_EQ(config->instances[1].role, InstanceRole::kGeneration);
  EXPECT_FALSE(config->model.draft_path.empty());
}

TEST(ConfigYamlTest, TwoAggregatedInstancesExampleParses) {
  absl::StatusOr<DeploymentConfig> config = LoadDeploymentConfig("deploy/local/agg_two_dep2.yaml");
  ASSERT_THAT(config, IsOk());
  ASSERT_EQ(config->instances.size(), 2u);
  for (const InstanceConfig& instance : config->instances) {
    EXPECT_EQ(instance.role, InstanceRole::kAggregated);
    EXPECT_EQ(instance.world_size, 2);
  }
  EXPECT_EQ(config->router.migration_limit, 2);
}

TEST(ConfigYamlTest, FakeEngineBenchmarkExampleParses) {
  absl::StatusOr<DeploymentConfig> config =
      LoadDeploymentConfig("deploy/local/bench_fake_dep2.yaml");
  ASSERT_THAT(config, IsOk());
  ASSERT_EQ(config->instances.size(), 1u);
  EXPECT_EQ(config->instances[0].engine, EngineKind::kFake);
  EXPECT_EQ(config->instances[0].world_size, 2);
}

TEST(ConfigYamlTest, DeepseekExampleParses) {
  absl::StatusOr<DeploymentConfig> config =
      LoadDeploymentConfig("deploy/local/disagg_dsv3_ctx_dep2_gen_dep4.yaml");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model.name, "tiny-dsv3");  // the demo makes the preset of this name
  const InstanceConfig* ctx = config->FindInstance("ctx0");
  const InstanceConfig* gen = config->FindInstance("gen0");
  ASSERT_NE(ctx, nullptr);
  ASSERT_NE(gen, nullptr);
  EXPECT_EQ(ctx->role, InstanceRole::kContext);
  EXPECT_EQ(gen->role, InstanceRole::kGeneration);
  EXPECT_EQ(gen->world_size, 4);
}

TEST(ConfigYamlTest, DisaggregatedExampleParses) {
  absl::StatusOr<DeploymentConfig> config =
      LoadDeploymentConfig("deploy/local/disagg_ctx_dep2_gen_dep4.yaml");
  ASSERT_THAT(config, IsOk());
  const InstanceConfig* ctx = config->FindInstance("ctx0");
  const InstanceConfig* gen = config->FindInstance("gen0");
  ASSERT_NE(ctx, nullptr);
  ASSERT_NE(gen, nullptr);
  EXPECT_EQ(ctx->role, InstanceRole::kContext);
  EXPECT_EQ(ctx->world_size, 2);
  EXPECT_EQ(gen->role, InstanceRole::kGeneration);
  EXPECT_EQ(gen->world_size, 4);
  EXPECT_EQ(gen->executor.max_batch_size, 2);
  EXPECT_EQ(gen->executor.spec_k, 0) << "the examples use the speculative block, not the alias";
  EXPECT_EQ(gen->speculative.method, spec::Method::kDraftModel);
  EXPECT_EQ(gen->speculative.num_draft_tokens, 3);
  EXPECT_EQ(EffectiveSpeculative(*ctx), gen->speculative);
  EXPECT_EQ(gen->executor.draft_pool, DraftPool::kUnpaired);
  EXPECT_FALSE(config->model.draft_path.empty());
  EXPECT_EQ(config->router.policy, RoutingPolicy::kLeastLoad);
  EXPECT_TRUE(ctx->transfer.tcp_data_plane);
  EXPECT_TRUE(gen->transfer.tcp_data_plane);
  EXPECT_EQ(gen->comm.engine_transport, CommTransport::kAuto);
  EXPECT_EQ(ctx->comm.vote_transport, CommTransport::kAuto);
}

TEST(ConfigYamlTest, KvAwareRoutingSettings) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      "model: {name: m, path: p}\n"
      "router: {policy: kv_aware, kv_index_max_keys: 5000, kv_prefix_weight: 2.5,\n"
      "         kv_load_weight: 0, kv_free_weight: 1.5, kv_event_interval_ms: 7,\n"
      "         kv_host_hit_weight: 0.75, kv_disk_hit_weight: 0}\n"
      "instances: [{name: a, role: aggregated}]\n",
      "");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->router.kv_host_hit_weight, 0.75);
  EXPECT_EQ(config->router.kv_disk_hit_weight, 0);
  // A tier hit worth more than a device hit is refused, naming the field.
  absl::StatusOr<DeploymentConfig> over = ParseDeploymentConfig(
      "model: {name: m, path: p}\n"
      "router: {policy: kv_aware, kv_host_hit_weight: 1.5}\n"
      "instances: [{name: a, role: aggregated}]\n",
      "");
  EXPECT_THAT(over, StatusIs(absl::StatusCode::kInvalidArgument,
                             ::testing::HasSubstr("router.kv_host_hit_weight")));
  EXPECT_EQ(config->router.policy, RoutingPolicy::kKvAware);
  EXPECT_EQ(config->router.kv_index_max_keys, 5000);
  EXPECT_EQ(config->router.kv_prefix_weight, 2.5);
  EXPECT_EQ(config->router.kv_load_weight, 0);
  EXPECT_EQ(config->router.kv_free_weight, 1.5);
  EXPECT_EQ(config->router.kv_event_interval_ms, 7);
  EXPECT_EQ(RoutingPolicyName(RoutingPolicy::kKvAware), "kv_aware");
}

TEST(ConfigYamlTest, TcpDataPlaneCanBeTurnedOff) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      "model: {name: m, path: p}\n"
      "instances: [{name: a, role: aggregated, transfer: {tcp_data_plane: false}}]\n",
      "");
  ASSERT_THAT(config, IsOk());
  EXPECT_FALSE(config->instances[0].transfer.tcp_data_plane);
  EXPECT_EQ(config->instances[0].transfer.transport, TransferTransport::kGrpc);
}

TEST(ConfigYamlTest, TransferTransportIsChosenByName) {
  const auto parse = [](const std::string& transfer) {
    return ParseDeploymentConfig("model: {name: m, path: p}\n"
                                 "instances: [{name: a, role: aggregated, transfer: " +
                                     transfer + "}]\n",
                                 "");
  };
  absl::StatusOr<DeploymentConfig> ucx = parse("{transport: ucx}");
  ASSERT_THAT(ucx, IsOk());
  EXPECT_EQ(ucx->instances[0].transfer.transport, TransferTransport::kUcx);
  EXPECT_TRUE(ucx->instances[0].transfer.tcp_data_plane);  // the fallback
  absl::StatusOr<DeploymentConfig> grpc = parse("{transport: grpc}");
  ASSERT_THAT(grpc, IsOk());
  EXPECT_FALSE(grpc->instances[0].transfer.tcp_data_plane);
  absl::StatusOr<DeploymentConfig> fallback_grpc = parse("{transport: ucx, tcp_data_plane: false}");
  ASSERT_THAT(fallback_grpc, IsOk());
  EXPECT_EQ(fallback_grpc->instances[0].transfer.transport, TransferTransport::kUcx);
  EXPECT_FALSE(fallback_grpc->instances[0].transfer.tcp_data_plane);
  absl::StatusOr<DeploymentConfig> defaults = parse("{}");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->instances[0].transfer.transport, TransferTransport::kTcp);
  EXPECT_THAT(parse("{transport: rdma}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("transfer.transport: must be one of ucx | tcp | grpc, got 'rdma'")));
  EXPECT_EQ(TransferTransportName(TransferTransport::kUcx), "ucx");
}

TEST(ConfigYamlTest, CommTransportsAreChosenPerGroup) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      "model: {name: m, path: p}\n"
      "instances: [{name: a, role: aggregated,\n"
      "             comm: {vote_transport: shm, engine_transport: auto}}]\n",
      "");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->instances[0].comm.vote_transport, CommTransport::kShm);
  EXPECT_EQ(config->instances[0].comm.engine_transport, CommTransport::kAuto);
  EXPECT_EQ(CommTransportName(CommTransport::kAuto), "auto");
}

TEST(ConfigYamlTest, FreeMemoryFractionParses) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      "model: {name: m, path: p}\n"
      "instances: [{name: a, role: aggregated, kv: {free_memory_fraction: 0.75}}]\n",
      "");
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->instances[0].kv.free_memory_fraction, 0.75);
  EXPECT_FALSE(config->instances[0].kv.num_blocks_auto);
}

struct BadYaml {
  std::string label;
  std::string yaml;
  std::string message;
};

class BadYamlTest : public ::testing::TestWithParam<BadYaml> {};

TEST_P(BadYamlTest, NamesTheField) {
  EXPECT_THAT(ParseDeploymentConfig(GetParam().yaml, "", "test.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadYamlTest,
    ::testing::Values(
        BadYaml{"syntax", "model: {name: [\n", "test.yaml: invalid YAML"},
        BadYaml{"not_a_map", "- 1\n- 2\n", "the top level must be a mapping"},
        BadYaml{"unknown_top", std::string(kMinimal) + "extra: 1\n", "extra: unknown key (line"},
        BadYaml{"missing_model", "instances: [{name: a, role: aggregated}]\n",
                "model: is required"},
        BadYaml{"missing_role", "model: {name: m, path: p}\ninstances: [{name: a}]\n",
                "instances[0].role: is required"},
        BadYaml{"unknown_nested",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, executor: {max_batch: 3}}]\n",
                "instances[0].executor.max_batch: unknown key"},
        BadYaml{"wrong_int",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, executor: {max_batch_size: abc}}]\n",
                "instances[0].executor.max_batch_size: must be an integer, got 'abc'"},
        BadYaml{"float_for_int",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, kv: {num_blocks: 1.5}}]\n",
                "instances[0].kv.num_blocks: must be an integer, got '1.5'"},
        BadYaml{"zero_batch",
                "model: {name: m, path: p}\ninstances:\n"
                "  - {name: a, role: aggregated}\n"
                "  - {name: b, role: aggregated, executor: {max_batch_size: 0}}\n",
                "instances[1].executor.max_batch_size: must be >= 1, got 0"},
        BadYaml{"bad_bool",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, kv: {prefix_reuse: maybe}}]\n",
                "instances[0].kv.prefix_reuse: must be true or false, got 'maybe'"},
        BadYaml{"bad_enum", "model: {name: m, path: p}\ninstances: [{name: a, role: decode}]\n",
                "instances[0].role: must be one of aggregated | context | generation, got "
                "'decode'"},
        BadYaml{"bad_capacity_policy",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, executor: {capacity_policy: evict}}]\n",
                "instances[0].executor.capacity_policy: must be one of max_utilization | "
                "guaranteed_no_evict, got 'evict'"},
        BadYaml{"bad_policy",
                "model: {name: m, path: p}\nrouter: {policy: random}\n"
                "instances: [{name: a, role: aggregated}]\n",
                "router.policy: must be one of round_robin | least_load | kv_aware"},
        BadYaml{"bad_kv_weight",
                "model: {name: m, path: p}\nrouter: {kv_load_weight: -1}\n"
                "instances: [{name: a, role: aggregated}]\n",
                "router.kv_load_weight: must be in [0, 1e6], got -1"},
        BadYaml{"bad_kv_index",
                "model: {name: m, path: p}\nrouter: {kv_index_max_keys: 0}\n"
                "instances: [{name: a, role: aggregated}]\n",
                "router.kv_index_max_keys: must be in [1, 4294967296], got 0"},
        BadYaml{"bad_transport",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, comm: {vote_transport: tcp}}]\n",
                "instances[0].comm.vote_transport: must be one of gloo | shm | auto | nccl, got "
                "'tcp'"},
        BadYaml{"nccl_needs_cuda",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, comm: {engine_transport: nccl}}]\n",
                "instances[0].comm.engine_transport: nccl needs the CUDA engine and a GPU per "
                "rank, but the engine is cpu (use gloo, shm or auto)"},
        BadYaml{"num_blocks_auto_on_cpu",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, kv: {num_blocks: auto}}]\n",
                "instances[0].kv.num_blocks: auto sizes the pool from free GPU memory and needs "
                "a GPU engine, but the engine is cpu"},
        BadYaml{"bad_fraction",
                "model: {name: m, path: p}\n"
                "instances: [{name: a, role: aggregated, kv: {free_memory_fraction: most}}]\n",
                "instances[0].kv.free_memory_fraction: must be a number, got 'most'"},
        BadYaml{"instances_map", "model: {name: m, path: p}\ninstances: {name: a}\n",
                "instances: must be a sequence"},
        BadYaml{"section_scalar",
                "model: {name: m, path: p}\ninstances: [{name: a, role: aggregated, kv: 3}]\n",
                "instances[0].kv: must be a mapping"},
        BadYaml{"security_unknown", std::string(kMinimal) + "security: {cluster_token: abc}\n",
                "security.cluster_token: unknown key"},
        BadYaml{"security_tls_partial",
                std::string(kMinimal) + "security: {tls_cert_file: c.pem, tls_ca_file: ca.pem}\n",
                "security.tls_key_file: is required with the other TLS files"},
        BadYaml{"string_is_map",
                "model: {name: {x: 1}, path: p}\n"
                "instances: [{name: a, role: aggregated}]\n",
                "model.name: must be a string"}),
    [](const ::testing::TestParamInfo<BadYaml>& info) { return info.param.label; });

TEST(ConfigYamlTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadDeploymentConfig("no/such/config.yaml"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no/such/config.yaml")));
}

}  // namespace
}  // namespace lockstep::config
