// The deployment configuration: one YAML file describes the router, the model and
// every instance (docs/design.md §2). The router reads all of it; a worker reads the model
// and its own instance's section; the launcher reads it to start every process.
//
//   ASSIGN_OR_RETURN(DeploymentConfig config, LoadDeploymentConfig("deploy/local/agg_dep2.yaml"));
//   const InstanceConfig* self = config.FindInstance("agg0");
//
// Every field is documented with its default below (the executor block's scheduling
// knobs in scheduler/scheduler_settings.h). `Validate()` checks ranges and
// cross-field rules; every error names the field by its path in the file, e.g.
// `instances[1].executor.max_batch_size: must be >= 1, got 0`. Parsing is in
// config_yaml.h. Plain value types; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_CONFIG_DEPLOYMENT_CONFIG_H_
#define LOCKSTEP_RUNTIME_CONFIG_DEPLOYMENT_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvcache/kv_types.h"
#include "runtime/config/cuda_settings.h"
#include "scheduler/scheduler_settings.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::config {

// What an instance serves (docs/design.md §2). YAML: aggregated | context | generation.
// The scheduler's own type and names (sched::InstanceRoleName), which the executor reads.
using InstanceRole = sched::InstanceRole;
// YAML: cpu (the CPU transformer engine) | fake (a deterministic test engine) | cuda
// (the GPU engine, settings in `cuda:`; a worker built without CUDA refuses to start).
enum class EngineKind { kCpu, kFake, kCuda };
// How a rank pads an empty batch (docs/design.md §1). YAML: reserved | compat. The
// scheduler's own type and names (sched::DummyPolicyName).
using DummyPolicy = sched::DummyPolicy;
// When a rank admits a new request's KV (scheduler/scheduler_settings.h). YAML:
// max_utilization | guaranteed_no_evict. The scheduler's own type and names
// (sched::CapacityPolicyName).
using CapacityPolicy = sched::CapacityPolicy;
// The draft model's KV pool (docs/design.md §5). YAML: none | paired | unpaired. The
// KV manager's own type and names (kv::DraftModeName): the config names it, the manager
// builds it.
using DraftPool = kv::DraftMode;
// How the router picks an instance. YAML: round_robin | least_load | kv_aware.
enum class RoutingPolicy { kRoundRobin, kLeastLoad, kKvAware };
// How the ranks of an instance exchange collectives. YAML: gloo (TCP, any hosts) |
// shm (shared memory; every rank on one host) | auto (shm when the rendezvous shows
// every rank on one host, else gloo) | nccl (NCCL on the GPUs: the CUDA engine's
// expert-parallel group, comm.engine_transport, which the engine makes itself; not the
// executor's vote yet: validation says so).
enum class CommTransport { kGloo, kShm, kAuto, kNccl };
// How KV moves from a context rank to a generation rank (`transfer.transport`). YAML:
// ucx (UCX one-sided gets: RDMA, shared memory or TCP as UCX_TLS allows; falls back to
// tcp where a peer has no UCX) | tcp (our TCP data plane, falling back to gRPC) | grpc
// (gRPC streams only). docs/transfer-ucx.md.
enum class TransferTransport { kUcx, kTcp, kGrpc };

// The YAML spelling of each value, and its inverse (an error lists the valid names).
using sched::InstanceRoleName;
std::string_view EngineKindName(EngineKind engine);
using sched::CapacityPolicyName;
using sched::DummyPolicyName;
std::string_view DraftPoolName(DraftPool pool);
std::string_view RoutingPolicyName(RoutingPolicy policy);
std::string_view CommTransportName(CommTransport transport);
std::string_view TransferTransportName(TransferTransport transport);
absl::StatusOr<InstanceRole> ParseInstanceRole(std::string_view name);
absl::StatusOr<EngineKind> ParseEngineKind(std::string_view name);
absl::StatusOr<DummyPolicy> ParseDummyPolicy(std::string_view name);
absl::StatusOr<CapacityPolicy> ParseCapacityPolicy(std::string_view name);
absl::StatusOr<DraftPool> ParseDraftPool(std::string_view name);
absl::StatusOr<RoutingPolicy> ParseRoutingPolicy(std::string_view name);
absl::StatusOr<CommTransport> ParseCommTransport(std::string_view name);
absl::StatusOr<TransferTransport> ParseTransferTransport(std::string_view name);

// `model:` — the served model. Relative paths are resolved against the directory of the
// config file when the file is loaded (so a config works from any current directory);
// after loading they are absolute or as given when already absolute.
struct ModelConfig {
  // Served model name: what clients put in "model" and `/v1/models` lists. Required;
  // letters, digits, '.', '_', '-'.
  std::string name;
  // Model directory (weights, lockstep_tokenizer.json). Required.
  std::string path;
  // Draft model directory for speculative decoding; empty: no draft model. Required
  // when any instance speculates with method draft_model (or `executor.spec_k > 0`).
  std::string draft_path;
  // How the router splits a chat answer into content, reasoning_content and tool_calls
  // (runtime/router/tool_calls/parser_family.h), and the text format a forced tool
  // call is written in: the tool-call format, one of auto (what the model's chat
  // template writes), none, hermes (also qwen), llama3_json, deepseek_v3, mistral;
  // and reasoning: auto (the template's), think (<think>...</think>) or none.
  std::string tool_call_parser = "auto";
  std::string reasoning_parser = "auto";
};

// Threads of the router's gRPC server kept for membership, heartbeats and the
// rendezvous: RouterService.Generate calls at once never exceed router.grpc_max_threads
// minus this (docs/security.md §5).
inline constexpr int64_t kRouterGrpcReservedThreads = 16;

// The names model.tool_call_parser and model.reasoning_parser take.
inline constexpr std::string_view kToolCallParsers[] = {
    "auto", "none", "hermes", "qwen", "llama3_json", "deepseek_v3", "mistral"};
inline constexpr std::string_view kReasoningParsers[] = {"auto", "think", "none"};

// `router:` — the router daemon.
struct RouterConfig {
  // host:port of the OpenAI-compatible HTTP API; port 0 picks a free port.
  std::string http_listen = "127.0.0.1:0";
  // host:port of RouterService (gRPC clients, worker registration, rendezvous).
  std::string grpc_listen = "127.0.0.1:0";
  // HTTPS on http_listen (docs/security.md §2): the router's certificate (PEM: its own
  // first, then any intermediates) and its key; both or neither. Empty: plain HTTP.
  std::string https_cert_file;
  std::string https_key_file;
  // The CA that the deployment's own clients (the launcher's /health polling, `lockstep
  // bench --config`) check the router's certificate against; empty: the system's
  // trusted CAs. Only with https_cert_file.
  std::string https_ca_file;
  // round_robin | least_load | kv_aware (runtime/router/routing/routing_policy.h): kv_aware
  // sends a request where its prompt's prefix is cached (instance and rank), from the
  // KV events the leaders of aggregated and context instances with prefix reuse
  // publish (under every policy: the router's prefix-hit metric reads them too).
  RoutingPolicy policy = RoutingPolicy::kRoundRobin;
  // kv_aware: most block-hash keys the router's prefix index holds (least recently
  // used dropped first); about 100 bytes each.
  int64_t kv_index_max_keys = 1 << 20;
  // kv_aware: score = kv_prefix_weight * cached prefix / prompt
  //                 - kv_load_weight * load / (most load among the candidates + 1)
  //                 - kv_free_weight * (1 - free KV blocks / most among the candidates).
  double kv_prefix_weight = 1.0;
  double kv_load_weight = 0.5;
  double kv_free_weight = 0.25;
  // kv_aware: what a cached prompt token is worth when only a rank's host or disk KV
  // tier holds it (brought back, not recomputed), against 1 on the device and 0 for a
  // miss; each in [0, 1].
  double kv_host_hit_weight = 0.5;
  double kv_disk_hit_weight = 0.25;
  // A leader sends its ranks' KV events to the router this often (at most).
  int64_t kv_event_interval_ms = 20;
  // Client API keys (docs/security.md §1): with api_key and/or api_keys_file set, HTTP
  // clients must send `Authorization: Bearer KEY` (else 401) and gRPC clients of
  // RouterService.Generate the same as `authorization` metadata (else UNAUTHENTICATED),
  // KEY being api_key or any line of api_keys_file (one key per line; blank lines and
  // '#' comments are skipped). The file is read when the router starts: unreadable or
  // without a key, the router does not start (the error names this field). A relative
  // path is resolved against the config file's directory.
  std::string api_key;
  std::string api_keys_file;
  // Workers send a Heartbeat this often.
  int64_t heartbeat_interval_ms = 500;
  // A registered instance whose last heartbeat is older than this gets no new requests,
  // and its in-flight requests end with an error. Must exceed heartbeat_interval_ms.
  int64_t heartbeat_timeout_ms = 2000;
  // The router polls every instance's Health and Stats this often, each poll bounded
  // by the larger of this and 1 s; two failed polls in a row make an instance
  // unhealthy.
  int64_t health_check_interval_ms = 500;
  // A request that has not finished after this long ends with DEADLINE_EXCEEDED.
  int64_t request_timeout_s = 600;
  // Most migrations of one request: how many times it may move to another instance
  // after the instance serving it failed (runtime/router/core/migration.h), so at most
  // 1 + migration_limit attempts (the default: 3). 0: requests never migrate.
  int64_t migration_limit = 2;
  // Longest prompt accepted, in tokens (longer: HTTP 400 / INVALID_ARGUMENT).
  int64_t max_prompt_tokens = 2048;
  // I/O threads of the event-driven HTTP server (runtime/async_http): they serve every
  // connection and stream and never wait; a request runs on a thread of its own.
  int64_t http_threads = 2;
  // Most generation requests in flight through the router (HTTP and gRPC together;
  // a request with `n` choices counts n times); one more is refused at once: HTTP 429
  // with Retry-After, gRPC RESOURCE_EXHAUSTED. 0: 4 × the instances' capacity (Σ
  // world_size × executor.max_num_active_requests) (runtime/router/front_door_limits.h).
  // Not bounded by grpc_max_threads: an HTTP request holds no thread.
  int64_t max_concurrent_requests = 0;
  // Most requests the router has outstanding at one instance (each leg of a two-leg
  // request counts on its instance while it runs); when every healthy instance of the
  // role a request needs is at it, the request is refused at once like one beyond
  // max_concurrent_requests (counted in lockstep_router_refusals_total
  // {reason="max_queued_requests"}). 0: no limit.
  int64_t max_queued_requests = 0;
  // The HTTP listener's bounds (docs/security.md §5). A body over max_request_body_bytes
  // is 413; a request head (request line and headers) over max_header_bytes or with more
  // than max_header_count lines is 431; both with an OpenAI error body.
  int64_t max_request_body_bytes = 16 << 20;
  int64_t max_header_bytes = 64 << 10;
  int64_t max_header_count = 100;
  // Most open HTTP connections (an open connection holds no thread). One more gets 503
  // with Retry-After and is closed at once, unread (over HTTPS: closed). 0: 8 × the
  // instances' capacity, at least 1024.
  int64_t max_connections = 0;
  // A new connection whose first request does not begin within
  // http_first_request_timeout_ms of its accept (HTTPS: of its handshake) is closed;
  // longer than the idle timeout, because a burst of connections overflows the accept
  // queue and their requests reach the router seconds late (TCP retransmits).
  // A connection idle between requests for http_idle_timeout_ms is closed. A request's
  // head and body must arrive in full within http_read_timeout_ms of its first byte,
  // however it trickles in (else 408, and the connection is closed); an HTTPS
  // handshake within it too. Neither applies while a response streams.
  int64_t http_first_request_timeout_ms = 30000;
  int64_t http_idle_timeout_ms = 5000;
  int64_t http_read_timeout_ms = 10000;
  // A response write that makes no progress for this long (a client that stopped
  // reading its stream) ends the connection and cancels the request. It bounds a
  // RouterService.Generate stream's writes the same way (the call is cancelled).
  int64_t http_write_timeout_ms = 10000;
  // /health and /metrics need the API key too (when api_key is set).
  bool api_key_for_health_and_metrics = false;
  // Most threads of the router's gRPC server (gRPC's ResourceQuota): each call holds one
  // while its handler runs (a RouterService.Generate stream, a rendezvous Wait), its
  // pollers count too. A call that finds none free is refused at once with
  // RESOURCE_EXHAUSTED. At least kRouterGrpcReservedThreads: RouterService.Generate
  // calls are held to grpc_max_threads - kRouterGrpcReservedThreads at once, so that
  // internal calls find a thread while those calls stream; it must also exceed the
  // ranks that bootstrap at once (each waits on the rendezvous).
  int64_t grpc_max_threads = 1024;
};

// `instances[i].executor:` — the executor loop of every rank of the instance. The
// scheduling knobs (max_batch_size, max_num_tokens, max_num_active_requests, chunk_size,
// dummy_policy, capacity_policy) and their defaults are the scheduler's
// (scheduler/scheduler_settings.h); validation adds: max_num_tokens >= max_batch_size * (1 + K),
// chunk_size <= max_num_tokens.
struct ExecutorSettings : sched::SchedulerSettings {
  // Alias kept for older files: `spec_k: K` (K > 0) means `speculative: {method:
  // draft_model, num_draft_tokens: K}`. 0..16; give either it or `speculative`.
  int64_t spec_k = 0;
  // The draft model's KV pool: paired or unpaired with method draft_model, none
  // otherwise (the n-gram drafter keeps no draft KV).
  DraftPool draft_pool = DraftPool::kNone;
  // A step that takes longer than this makes Health report "not progressing".
  int64_t step_timeout_ms = 30000;
  // BLAS threads per rank for the CPU engine.
  int64_t blas_threads = 1;
  // Run the invariant audit (docs/design.md §7) after every step; violations are logged and
  // counted in Stats. Costs a little host time per step; on in tests.
  bool audit_every_step = false;
};

// `instances[i].kv:` — the KV pools of every rank of the instance.
struct KvSettings {
  int64_t tokens_per_block = 16;
  // Target pool size per rank, in blocks. YAML: a count, or `auto` (num_blocks_auto).
  int64_t num_blocks = 1024;
  // `num_blocks: auto`: the pool takes `free_memory_fraction` of the device memory that
  // is free once the weights, communicators and draft pool are in place
  // (AutoKvNumBlocks); num_blocks is ignored. Needs a GPU engine: the cpu and fake
  // engines need a count (validation says so).
  bool num_blocks_auto = false;
  // Share of free device memory that `num_blocks: auto` gives the target pool; in (0, 1).
  double free_memory_fraction = 0.9;
  // Draft pool size per rank, in blocks (used when executor.draft_pool is not none).
  int64_t draft_num_blocks = 1024;
  // Publish full blocks and reuse matching prompt prefixes (in every draft mode: a
  // paired draft pool reuses with the target, an unpaired one from its own tree).
  bool prefix_reuse = true;
  // KV tiers below the target pool (docs/design.md §5.1; draft_pool none only): bytes of
  // host memory per rank for evicted prefix blocks (0: off), and an optional disk tier
  // (a directory and bytes per rank).
  int64_t host_tier_bytes = 0;
  std::string disk_tier_path;
  int64_t disk_tier_bytes = 0;
};

// `instances[i].transfer:` — disaggregated KV transfer (context and generation roles).
struct TransferSettings {
  // A generation rank fails a KV receive not completed within this.
  int64_t deadline_ms = 10000;
  // A context rank releases an unclaimed request's KV after this; >= deadline_ms.
  int64_t lease_ms = 30000;
  // KV bytes go over a plain TCP data plane (gRPC carries the control); false: over
  // gRPC streams. A rank serves and pulls over TCP only where both sides have it on.
  // `transport: grpc` turns it off; with `transport: ucx` it is UCX's fallback.
  bool tcp_data_plane = true;
  // The KV data plane; `tcp_data_plane: false` alone means grpc.
  TransferTransport transport = TransferTransport::kTcp;
};

// `instances[i].comm:` — the transports of the instance's two collective groups.
// Explicit `shm` with ranks on several hosts fails the bootstrap on every rank.
struct CommSettings {
  // The executor's step collectives (intake broadcast, load all-gather, vote,
  // response gather).
  CommTransport vote_transport = CommTransport::kGloo;
  // The engine's expert-parallel group (the MoE all-to-all-v).
  CommTransport engine_transport = CommTransport::kGloo;
};

// `eplb:` — expert-parallel load balancing of the CPU engine's MoE (docs/eplb.md), e.g.
//   eplb: {expert_placement: placement.txt, load_window: 64, load_dump: loads.txt}
struct EplbSettings {
  // A placement file (runtime/eplb's text form, e.g. eplb_plan's output): the ranks
  // load the experts it gives them; empty: the contiguous sharding.
  std::string expert_placement;
  // Forwards per expert-load window, 0..1000000 (0: not measured); each window's loads
  // are all-reduced over the instance and, with load_dump, written to that file by
  // rank 0 (the input of eplb_plan).
  int64_t load_window = 0;
  std::string load_dump;
  // Live rebalancing: plan at the end of every Nth window and adopt at the next
  // (0..1000000; 0: never; needs load_window), with redundant_slots (0..64) spare
  // expert slots per rank.
  int64_t rebalance_windows = 0;
  int64_t redundant_slots = 0;
};

// `instances[i]:` — one DEP-N group of ranks.
struct InstanceConfig {
  // Unique; letters, digits, '_', '-'. Required.
  std::string name;
  InstanceRole role = InstanceRole::kAggregated;  // required in YAML
  // Ranks of the instance (DEP-N), 1..64.
  int64_t world_size = 1;
  EngineKind engine = EngineKind::kCpu;
  // host:port of the leader's WorkerService for a static deployment (the router polls
  // it from the start). Empty: the leader registers with the router (the launcher's
  // way, with free ports).
  std::string leader_address;
  ExecutorSettings executor;
  KvSettings kv;
  TransferSettings transfer;
  CommSettings comm;
  // `speculative:` — speculative decoding (docs/design.md §6), e.g.
  //   speculative: {method: ngram, num_draft_tokens: 4, dynamic: true, ngram_max: 3}
  // method: none | draft_model (a second model, model.draft_path, its KV in
  // executor.draft_pool) | ngram (prompt lookup: copies what followed the last match; no
  // draft model or KV). num_draft_tokens: K, the most drafts per generation step, 1..16
  // with a method, 0 with none. dynamic: choose K per request and step from its
  // acceptance rate, at most num_draft_tokens. ngram_max: the longest match tried (n
  // from ngram_max down to 1), 1..16. The fields and their rules are
  // spec::SpeculativeConfig's.
  spec::SpeculativeConfig speculative;
  CudaSettings cuda;  // engine cuda only (cuda_settings.h)
  EplbSettings eplb;  // engine cpu only
};

// What `instance` speculates with: its `speculative` block, or the `executor.spec_k`
// alias when the block is absent (method none when neither is set). Valid after
// DeploymentConfig::Validate().
spec::SpeculativeConfig EffectiveSpeculative(const InstanceConfig& instance);

// `placement:` — how the instances map onto nodes in a multi-node deployment
// (`lockstep plan slurm`, `lockstep render k8s`, `lockstep instance`); the local
// launcher ignores it. One node runs the ranks of one instance (or of its share of one).
struct PlacementConfig {
  // GPUs per node, one rank per GPU; 0: the ranks use no GPU (engine cpu or fake). A
  // node holds world_size / nodes_per_instance ranks, which must not exceed it. 0..64.
  int64_t gpus_per_node = 0;
  // Nodes one instance spans (LeaderWorkerSets on Kubernetes when > 1); every
  // world_size must be a multiple of it. 1..64.
  int64_t nodes_per_instance = 1;
  // Run each rank under `numactl --membind` to the NUMA nodes that have CPUs (Grace
  // nodes, whose GPU memory also shows up as NUMA nodes).
  bool numa_bind = false;
  // Environment of every rank (e.g. NCCL_* variables), in file order. Names are
  // [A-Za-z_][A-Za-z0-9_]*, and LOCKSTEP_* is reserved.
  std::vector<std::pair<std::string, std::string>> env;
  // Kubernetes: the node label whose value an instance's pods share (e.g.
  // nvidia.com/gpu.clique: one NVLink domain); empty: no affinity.
  std::string topology_key;
  // Kubernetes: every worker pod claims a ComputeDomain (multi-node NVLink on GB200 /
  // GB300 NVL72). Needs gpus_per_node > 0.
  bool compute_domain = false;
  // Kubernetes: extended resources every worker pod asks for, e.g. {rdma/ib: 1} for
  // the KV transfer over UCX across nodes (docs/transfer-ucx.md), in file order.
  std::vector<std::pair<std::string, int64_t>> rdma_resources;
};

// `security:` — the secrets every daemon of the deployment (router, worker, instance,
// launcher) uses (docs/security.md §1-2), as file names: runtime/security's
// SecurityFiles. Relative names are resolved against the config file's directory.
// A LOCKSTEP_* variable that is set wins over its field: LOCKSTEP_CLUSTER_TOKEN_FILE over
// cluster_token_file, and any of LOCKSTEP_TLS_{CERT,KEY,CA}_FILE / _SERVER_NAME over all
// four TLS fields (TLS files come as a set). The files are read when a daemon starts
// (an unreadable one stops it with an error naming the field and the file), not when
// the config is parsed: `plan slurm` and `render k8s` name files that exist only where
// the daemons run.
struct SecurityConfig {
  // The cluster token (first line; trailing whitespace ignored). Empty: no token
  // (a daemon then logs a warning and its internal services accept anyone).
  std::string cluster_token_file;
  // TLS for every internal gRPC server and channel: this node's certificate and key and
  // the cluster CA (PEM); all three or none.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  // The name servers' certificates are checked against; empty: the host dialled. Needs
  // the TLS files.
  std::string tls_server_name;

  bool operator==(const SecurityConfig&) const = default;
};

// The whole file.
struct DeploymentConfig {
  ModelConfig model;
  RouterConfig router;
  std::vector<InstanceConfig> instances;  // at least one
  PlacementConfig placement;
  SecurityConfig security;

  // Checks every field and the rules between them: unique instance names, context and
  // generation instances come together, spec_k > 0 needs model.draft_path. Reports
  // every problem, one per line, each prefixed with the field's path.
  absl::Status Validate() const;

  // The instance named `name`, or null.
  const InstanceConfig* FindInstance(std::string_view name) const;
};

// Whether any instance moves KV over UCX (transfer.transport: ucx).
bool UsesUcx(const DeploymentConfig& config);

// The target pool's block count under `num_blocks: auto`:
// floor(free_bytes * kv.free_memory_fraction / block_bytes), where `free_bytes` is the
// device memory free after the weights, communicators and draft pool. `field` names
// kv.num_blocks in errors: ResourceExhausted when that is not even one block,
// InvalidArgument for block_bytes 0.
absl::StatusOr<int64_t> AutoKvNumBlocks(const KvSettings& kv, std::string_view field,
                                        uint64_t free_bytes, uint64_t block_bytes);

// Validates "host:port" (port 0..65535, host non-empty). `field` names it in errors.
absl::Status ValidateHostPort(std::string_view field, std::string_view address);

}  // namespace lockstep::config

#endif  // LOCKSTEP_RUNTIME_CONFIG_DEPLOYMENT_CONFIG_H_
