#include "runtime/config/deployment_config.h"

#include <functional>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::config {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

DeploymentConfig ValidDisagg() {
  DeploymentConfig config;
  config.model = {.name = "tiny-moe", .path = "/models/tiny-moe", .draft_path = "/models/draft"};
  InstanceConfig ctx;
  ctx.name = "ctx0";
  ctx.role = InstanceRole::kContext;
  ctx.world_size = 2;
  ctx.executor.spec_k = 3;  // the generation instance's draft KV comes from here
  ctx.executor.draft_pool = DraftPool::kUnpaired;
  InstanceConfig gen;
  gen.name = "gen0";
  gen.role = InstanceRole::kGeneration;
  gen.world_size = 4;
  gen.executor.max_batch_size = 2;
  gen.executor.spec_k = 3;
  gen.executor.draft_pool = DraftPool::kUnpaired;
  config.instances = {ctx, gen};
  return config;
}

TEST(DeploymentConfigTest, DefaultsOfAValidConfigPass) {
  EXPECT_THAT(ValidDisagg().Validate(), IsOk());
}

// An HTTP request holds no gRPC thread: the concurrency limit may exceed the gRPC
// server's threads (RouterService.Generate calls have their own bound).
TEST(DeploymentConfigTest, ConcurrentRequestsBeyondTheGrpcThreadsPass) {
  DeploymentConfig config = ValidDisagg();
  config.router.max_concurrent_requests = 20000;
  config.router.grpc_max_threads = 1024;
  EXPECT_THAT(config.Validate(), IsOk());
}

struct BadField {
  std::string label;
  std::function<void(DeploymentConfig&)> mutate;
  std::string message;  // expected substring, starting with the field path
};

class BadFieldTest : public ::testing::TestWithParam<BadField> {};

TEST_P(BadFieldTest, NamesTheField) {
  DeploymentConfig config = ValidDisagg();
  GetParam().mutate(config);
  EXPECT_THAT(config.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BadFieldTest,
    ::testing::Values(
        BadField{"model_name", [](auto& c) { c.model.name = ""; }, "model.name: is required"},
        BadField{"model_name_chars", [](auto& c) { c.model.name = "a b"; },
                 "model.name: must contain only"},
        BadField{"model_path", [](auto& c) { c.model.path = ""; }, "model.path: is required"},
        BadField{"draft_path", [](auto& c) { c.model.draft_path = ""; },
                 "model.draft_path: is required: instances[1].executor.spec_k is 3"},
        BadField{"http_listen", [](auto& c) { c.router.http_listen = "nowhere"; },
                 "router.http_listen: must be host:port, got 'nowhere'"},
        BadField{"grpc_port", [](auto& c) { c.router.grpc_listen = "127.0.0.1:70000"; },
                 "router.grpc_listen: port must be a number in [0, 65535]"},
        BadField{"heartbeat_timeout", [](auto& c) { c.router.heartbeat_timeout_ms = 100; },
                 "router.heartbeat_timeout_ms: must be > heartbeat_interval_ms (500), got 100"},
        BadField{"request_timeout", [](auto& c) { c.router.request_timeout_s = 0; },
                 "router.request_timeout_s: must be >= 1, got 0"},
        BadField{"migration_limit", [](auto& c) { c.router.migration_limit = -1; },
                 "router.migration_limit: must be >= 0, got -1"},
        BadField{"max_queued", [](auto& c) { c.router.max_queued_requests = -1; },
                 "router.max_queued_requests: must be >= 0, got -1"},
        BadField{"max_body", [](auto& c) { c.router.max_request_body_bytes = 0; },
                 "router.max_request_body_bytes: must be in [1, 1073741824], got 0"},
        BadField{"max_header_bytes", [](auto& c) { c.router.max_header_bytes = 100; },
                 "router.max_header_bytes: must be in [1024, 16777216], got 100"},
        BadField{"max_header_count", [](auto& c) { c.router.max_header_count = 0; },
                 "router.max_header_count: must be in [1, 10000], got 0"},
        BadField{"max_connections", [](auto& c) { c.router.max_connections = -1; },
                 "router.max_connections: must be >= 0, got -1"},
        BadField{"first_request_timeout",
                 [](auto& c) { c.router.http_first_request_timeout_ms = 0; },
                 "router.http_first_request_timeout_ms: must be in [1, 3600000], got 0"},
        BadField{"idle_timeout", [](auto& c) { c.router.http_idle_timeout_ms = 0; },
                 "router.http_idle_timeout_ms: must be in [1, 3600000], got 0"},
        BadField{"read_timeout", [](auto& c) { c.router.http_read_timeout_ms = -5; },
                 "router.http_read_timeout_ms: must be in [1, 3600000], got -5"},
        BadField{"write_timeout", [](auto& c) { c.router.http_write_timeout_ms = 0; },
                 "router.http_write_timeout_ms: must be in [1, 3600000], got 0"},
        BadField{"grpc_max_threads", [](auto& c) { c.router.grpc_max_threads = 15; },
                 "router.grpc_max_threads: must be in [16, 65536], got 15"},
        BadField{"https_cert_alone", [](auto& c) { c.router.https_cert_file = "/tls/router.pem"; },
                 "router.https_key_file: is required with router.https_cert_file"},
        BadField{"https_key_alone", [](auto& c) { c.router.https_key_file = "/tls/router.key"; },
                 "router.https_cert_file: is required with router.https_key_file"},
        BadField{"https_ca_alone", [](auto& c) { c.router.https_ca_file = "/tls/ca.pem"; },
                 "router.https_ca_file: is only used with router.https_cert_file (HTTPS)"},
        BadField{"max_prompt", [](auto& c) { c.router.max_prompt_tokens = -1; },
                 "router.max_prompt_tokens: must be >= 1, got -1"},
        BadField{"no_instances", [](auto& c) { c.instances.clear(); },
                 "instances: must list at least one instance"},
        BadField{"instance_name", [](auto& c) { c.instances[0].name = ""; },
                 "instances[0].name: is required"},
        BadField{"duplicate_name", [](auto& c) { c.instances[1].name = "ctx0"; },
                 "instances[1].name: duplicate instance name 'ctx0'"},
        BadField{"world_size", [](auto& c) { c.instances[1].world_size = 0; },
                 "instances[1].world_size: must be in [1, 64], got 0"},
        BadField{"max_batch_size", [](auto& c) { c.instances[1].executor.max_batch_size = 0; },
                 "instances[1].executor.max_batch_size: must be >= 1, got 0"},
        BadField{"max_num_tokens",
                 [](auto& c) {
                   c.instances[1].executor.max_num_tokens = 7;
                   c.instances[1].executor.chunk_size = 4;
                 },
                 "instances[1].executor.max_num_tokens: must be >= max_batch_size * (1 + "
                 "spec_k) = 8, got 7"},
        BadField{"active", [](auto& c) { c.instances[0].executor.max_num_active_requests = 0; },
                 "instances[0].executor.max_num_active_requests: must be >= 1, got 0"},
        BadField{"spec_k", [](auto& c) { c.instances[1].executor.spec_k = 17; },
                 "instances[1].executor.spec_k: must be in [0, 16], got 17"},
        BadField{"draft_pool_needed",
                 [](auto& c) { c.instances[1].executor.draft_pool = DraftPool::kNone; },
                 "instances[1].executor.draft_pool: must be paired or unpaired when spec_k > 0"},
        BadField{"draft_pool_unused",
                 [](auto& c) {
                   c.instances[0].executor.spec_k = 0;
                   c.instances[0].executor.draft_pool = DraftPool::kPaired;
                 },
                 "instances[0].executor.draft_pool: must be none when spec_k is 0, got paired"},
        BadField{"chunk_size", [](auto& c) { c.instances[0].executor.chunk_size = 1000; },
                 "instances[0].executor.chunk_size: must be <= max_num_tokens (512), got 1000"},
        BadField{"blas_threads", [](auto& c) { c.instances[0].executor.blas_threads = 0; },
                 "instances[0].executor.blas_threads: must be in [1, 256], got 0"},
        BadField{"step_timeout", [](auto& c) { c.instances[0].executor.step_timeout_ms = 0; },
                 "instances[0].executor.step_timeout_ms: must be >= 1, got 0"},
        BadField{"tokens_per_block", [](auto& c) { c.instances[0].kv.tokens_per_block = 0; },
                 "instances[0].kv.tokens_per_block: must be in [1, 4096], got 0"},
        BadField{"num_blocks", [](auto& c) { c.instances[0].kv.num_blocks = 0; },
                 "instances[0].kv.num_blocks: must be >= 1, got 0"},
        BadField{"num_blocks_auto_on_cpu",
                 [](auto& c) { c.instances[0].kv.num_blocks_auto = true; },
                 "instances[0].kv.num_blocks: auto sizes the pool from free GPU memory and needs "
                 "a GPU engine, but the engine is cpu (give a block count)"},
        BadField{"free_memory_fraction_one",
                 [](auto& c) { c.instances[1].kv.free_memory_fraction = 1.0; },
                 "instances[1].kv.free_memory_fraction: must be > 0 and < 1, got 1"},
        BadField{"free_memory_fraction_zero",
                 [](auto& c) { c.instances[0].kv.free_memory_fraction = 0; },
                 "instances[0].kv.free_memory_fraction: must be > 0 and < 1, got 0"},
        BadField{"draft_blocks", [](auto& c) { c.instances[1].kv.draft_num_blocks = 0; },
                 "instances[1].kv.draft_num_blocks: must be >= 1, got 0"},
        BadField{"lease", [](auto& c) { c.instances[1].transfer.lease_ms = 5; },
                 "instances[1].transfer.lease_ms: must be >= transfer.deadline_ms (10000), got 5"},
        BadField{"leader_address", [](auto& c) { c.instances[0].leader_address = "host"; },
                 "instances[0].leader_address: must be host:port"},
        BadField{"tls_partial", [](auto& c) { c.security.tls_cert_file = "/tls/node.pem"; },
                 "security.tls_key_file: is required with the other TLS files"},
        BadField{"tls_server_name_alone",
                 [](auto& c) { c.security.tls_server_name = "lockstep.internal"; },
                 "security.tls_server_name: needs tls_cert_file, tls_key_file and tls_ca_file"},
        BadField{"context_alone", [](auto& c) { c.instances[1].role = InstanceRole::kAggregated; },
                 "instances: a context instance needs at least one generation instance"}),
    [](const ::testing::TestParamInfo<BadField>& info) { return info.param.label; });

TEST(DeploymentConfigTest, ReportsEveryProblemOnItsOwnLine) {
  DeploymentConfig config = ValidDisagg();
  config.instances[0].executor.max_batch_size = 0;
  config.instances[1].kv.num_blocks = 0;
  absl::Status status = config.Validate();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("instances[0].executor.max_batch_size")));
  EXPECT_THAT(std::string(status.message()), HasSubstr("\ninstances[1].kv.num_blocks"));
}

TEST(DeploymentConfigTest, EnumNamesRoundTrip) {
  for (InstanceRole role :
       {InstanceRole::kAggregated, InstanceRole::kContext, InstanceRole::kGeneration}) {
    absl::StatusOr<InstanceRole> parsed = ParseInstanceRole(InstanceRoleName(role));
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, role);
  }
  for (DraftPool pool : {DraftPool::kNone, DraftPool::kPaired, DraftPool::kUnpaired}) {
    EXPECT_EQ(*ParseDraftPool(DraftPoolName(pool)), pool);
  }
  EXPECT_EQ(*ParseRoutingPolicy("least_load"), RoutingPolicy::kLeastLoad);
  EXPECT_EQ(*ParseRoutingPolicy("kv_aware"), RoutingPolicy::kKvAware);
  EXPECT_EQ(*ParseDummyPolicy("compat"), DummyPolicy::kCompat);
  for (CapacityPolicy policy :
       {CapacityPolicy::kMaxUtilization, CapacityPolicy::kGuaranteedNoEvict}) {
    EXPECT_EQ(*ParseCapacityPolicy(CapacityPolicyName(policy)), policy);
  }
  EXPECT_THAT(ParseCapacityPolicy("no_evict"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be one of max_utilization | guaranteed_no_evict")));
  EXPECT_EQ(*ParseEngineKind("fake"), EngineKind::kFake);
  EXPECT_THAT(ParseRoutingPolicy("random"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be one of round_robin | least_load | kv_aware, got "
                                 "'random'")));
}

TEST(AutoKvNumBlocksTest, TakesTheFractionOfFreeMemoryInWholeBlocks) {
  KvSettings kv;
  kv.free_memory_fraction = 0.9;
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  // 0.9 * 10 GiB = 9216 MiB: 9216 blocks of 1 MiB, 4608 of 2 MiB, 3 of 3000 MiB.
  EXPECT_EQ(*AutoKvNumBlocks(kv, "kv.num_blocks", 10240 * kMiB, kMiB), 9216);
  EXPECT_EQ(*AutoKvNumBlocks(kv, "kv.num_blocks", 10240 * kMiB, 2 * kMiB), 4608);
  EXPECT_EQ(*AutoKvNumBlocks(kv, "kv.num_blocks", 10240 * kMiB, 3000 * kMiB), 3);
  kv.free_memory_fraction = 0.5;
  EXPECT_EQ(*AutoKvNumBlocks(kv, "kv.num_blocks", 141 * 1024 * kMiB, 64 * 1024), 1155072);
}

TEST(AutoKvNumBlocksTest, LessThanOneBlockOrAZeroBlockIsAnErrorNamingTheField) {
  KvSettings kv;
  EXPECT_THAT(AutoKvNumBlocks(kv, "instances[0].kv.num_blocks", 1000, 1000),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("instances[0].kv.num_blocks: auto gives no block: 0.9 of 1000 "
                                 "free bytes is less than one block of 1000 bytes")));
  EXPECT_THAT(
      AutoKvNumBlocks(kv, "instances[0].kv.num_blocks", 1000, 0),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("instances[0].kv.num_blocks")));
}

TEST(DeploymentConfigTest, FindInstance) {
  DeploymentConfig config = ValidDisagg();
  ASSERT_NE(config.FindInstance("gen0"), nullptr);
  EXPECT_EQ(config.FindInstance("gen0")->world_size, 4);
  EXPECT_EQ(config.FindInstance("nope"), nullptr);
}

}  // namespace
}  // namespace lockstep::config
