// A disaggregated request whose prompt prefix the context instance holds only in its
// host KV tier: the real executors, KV managers and CPU engines (tiny model) of a
// context and a generation instance, joined by GrpcTransceivers over 127.0.0.1 (TCP
// data plane). The context leg brings the prefix back from the host tier for its
// prefill, and its transfer reads those blocks from the pinned host copies
// (kvcache/tier_pins.h) instead of the device pool; the generation instance's greedy
// tokens equal a run without tiers, token for token; the pins are gone once the claim
// ends and the audit of both instances holds after every step.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/executor/executor.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/kv_descriptor.h"

namespace lockstep::exec {
namespace {

using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::testing::IsEmpty;

constexpr int kTpb = 8;
constexpr int32_t kContextBlocks = 16;  // the context's device pool: 128 tokens
constexpr int kMaxTokens = 8;

// The value of `v`; aborts the test binary when it is an error (a part that cannot be
// built leaves nothing to test).
template <typename T>
T Must(absl::StatusOr<T> v) {
  if (!v.ok()) {
    ADD_FAILURE() << v.status();
    std::abort();
  }
  return *std::move(v);
}

struct Seen {
  std::vector<int32_t> tokens;
  bool finished = false;
  absl::Status status;
  std::optional<sched::ContextSource> context;
  int64_t cached_prompt_tokens = 0;
};

class Sink : public ResponseSink {
 public:
  void OnResponses(std::vector<Response> responses) override {
    for (Response& r : responses) {
      Seen& s = seen[r.id];
      s.tokens.insert(s.tokens.end(), r.tokens.begin(), r.tokens.end());
      if (r.context.has_value()) s.context = r.context;
      s.cached_prompt_tokens = std::max(s.cached_prompt_tokens, r.cached_prompt_tokens);
      if (r.finished) {
        s.finished = true;
        s.status = r.status;
      }
    }
  }
  absl::flat_hash_map<RequestId, Seen> seen;
};

// One instance of one rank. Destroyed bottom-up: the transceiver (which reads the
// pools) before the executor (which owns them), the engine after.
struct Instance {
  std::unique_ptr<comm::Communicator> comm;
  std::unique_ptr<engine::ModelEngine> engine;
  Sink sink;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<transfer::GrpcTransceiver> transceiver;
};

std::unique_ptr<Instance> MakeInstance(sched::InstanceRole role, int32_t num_blocks,
                                       int64_t host_tier_blocks) {
  const std::string dir = PresetModelDir("tiny");
  auto in = std::make_unique<Instance>();
  ExecutorConfig config;
  config.instance = role == sched::InstanceRole::kContext ? "ctx0" : "gen0";
  config.role = role;
  config.audit_every_step = true;
  config.scheduler.max_batch_size = 4;
  config.scheduler.max_num_active_requests = 4;
  config.scheduler.max_num_tokens = 256;
  config.scheduler.prefix_reuse = true;
  config.kv.target.layout = *engine::ModelBlockLayout(dir, kTpb);
  config.kv.target.num_blocks = num_blocks;
  config.kv.dummy_reserved_tokens = 1;
  config.kv.tiers.host_bytes =
      host_tier_blocks * static_cast<int64_t>(config.kv.target.layout.BlockBytes());
  std::unique_ptr<kv::KvManager> kv = Must(kv::KvManager::Create(config.kv));
  transfer::GrpcTransceiverOptions t;
  t.name = config.instance + " rank 0";
  t.descriptor = transfer::DescribeKv(*kv, "tiny");
  t.copiers = transfer::CopiersOf(*kv);
  in->transceiver = Must(transfer::GrpcTransceiver::Create(t, SystemClock::Get()));
  config.transfer_address = in->transceiver->address();
  engine::CpuEngineOptions e;
  e.model_dir = dir;
  e.target_storage = reinterpret_cast<float*>(kv->Storage(kv::PoolKind::kTarget));
  e.target_layout = config.kv.target.layout;
  e.target_num_blocks = num_blocks;
  in->engine = Must(engine::CreateCpuEngine(e));
  in->comm = comm::MakeSoloCommunicator();
  Executor::Deps deps;
  deps.comm = in->comm.get();
  deps.engine = in->engine.get();
  deps.kv = std::move(kv);
  deps.transceiver = in->transceiver.get();
  deps.clock = SystemClock::Get();
  deps.sink = &in->sink;
  in->executor = Must(Executor::Create(config, std::move(deps)));
  return in;
}

struct Leg {
  std::vector<int32_t> tokens;       // the context's first, then the generation's
  int64_t cached_prompt_tokens = 0;  // the context leg's
};

class Disagg {
 public:
  explicit Disagg(int64_t host_tier_blocks)
      : ctx_(MakeInstance(sched::InstanceRole::kContext, kContextBlocks, host_tier_blocks)),
        gen_(MakeInstance(sched::InstanceRole::kGeneration, 64, 0)) {}

  // One request through both instances, until the generation side finished and the
  // context's claim ended (wall-clock deadline: the pull runs on transfer threads).
  Leg Run(const std::vector<int32_t>& prompt) {
    const RequestId id(next_id_++);
    NewRequestSpec c;
    c.id = id;
    c.type = sched::RequestType::kContextOnly;
    c.prompt = prompt;
    c.sampling.max_tokens = kMaxTokens;
    c.sampling.ignore_eos = true;
    ctx_->executor->inbox().Push(c);
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (!ctx_->sink.seen[id].context.has_value() && !ctx_->sink.seen[id].finished) {
      StepBoth(deadline);
      if (absl::Now() > deadline) break;
    }
    const Seen& leg = ctx_->sink.seen[id];
    EXPECT_TRUE(leg.context.has_value()) << "request " << id.value() << ": " << leg.status;
    if (!leg.context.has_value()) return {};
    NewRequestSpec g = c;
    g.type = sched::RequestType::kGenerationOnly;
    g.context_source = leg.context;
    gen_->executor->inbox().Push(g);
    while (!(gen_->sink.seen[id].finished && ctx_->executor->ClaimedIds().empty()) &&
           absl::Now() < deadline) {
      StepBoth(deadline);
    }
    const Seen& out = gen_->sink.seen[id];
    EXPECT_TRUE(out.finished) << "request " << id.value();
    EXPECT_THAT(out.status, IsOk()) << "request " << id.value();
    EXPECT_THAT(ctx_->executor->ClaimedIds(), IsEmpty());
    // The context leg produced the first token; the generation instance the rest.
    Leg result{{leg.context->first_token}, leg.cached_prompt_tokens};
    result.tokens.insert(result.tokens.end(), out.tokens.begin(), out.tokens.end());
    return result;
  }

  Executor& context() { return *ctx_->executor; }

 private:
  void StepBoth(absl::Time deadline) {
    for (Instance* in : {ctx_.get(), gen_.get()}) {
      const absl::Status step = in->executor->Step();
      ASSERT_TRUE(step.ok()) << in->executor->config().instance << ": " << step;
      EXPECT_THAT(in->executor->Audit(), IsEmpty()) << in->executor->config().instance;
    }
    // Nothing to compute while a pull runs: wait for its event, not for a step count.
    if (ctx_->executor->idle() && gen_->executor->idle()) {
      gen_->transceiver->WaitForEvent(std::min(absl::Milliseconds(50), deadline - absl::Now()));
    }
  }

  std::unique_ptr<Instance> ctx_;
  std::unique_ptr<Instance> gen_;
  int64_t next_id_ = 1;
};

struct RunResult {
  std::vector<Leg> legs;
  kv::ManagerStats kv;  // the context's
};

// A conversation's first turn, long unrelated prompts that evict its blocks from the
// context's device pool, then its second turn (the first turn's prompt and more).
RunResult Conversation(int64_t host_tier_blocks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto text = [&](int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(rng() % 256));
    return t;
  };
  Disagg d(host_tier_blocks);
  RunResult run;
  const std::vector<int32_t> first = text(6 * kTpb + 1);
  run.legs.push_back(d.Run(first));
  // Two long prompts (13 of the pool's 15 usable blocks each, one is the pad dummy's)
  // push every block of the first turn out.
  run.legs.push_back(d.Run(text(13 * kTpb)));
  run.legs.push_back(d.Run(text(13 * kTpb)));
  std::vector<int32_t> second = first;
  for (int32_t t : text(kTpb + 3)) second.push_back(t);
  // Nothing of it is left on the device.
  EXPECT_EQ(d.context().kv().ProbePrefix(second), 0);
  run.legs.push_back(d.Run(second));
  run.kv = d.context().kv().Stats();
  return run;
}

TEST(ContextHostTierTest, TheTransferReadsTheHostTierCopiesAndTokensMatch) {
  const uint64_t seed = 20261205;  // the prompts' tokens
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const RunResult off = Conversation(/*host_tier_blocks=*/0, seed);
  const RunResult on = Conversation(/*host_tier_blocks=*/64, seed);
  ASSERT_EQ(off.legs.size(), 4u);
  ASSERT_EQ(on.legs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(on.legs[i].tokens.size(), static_cast<size_t>(kMaxTokens)) << "leg " << i;
    EXPECT_EQ(on.legs[i].tokens, off.legs[i].tokens) << "leg " << i;
  }
  // The second turn's first 6 blocks came back from the host tier for the prefill...
  EXPECT_EQ(on.legs[3].cached_prompt_tokens, 6 * kTpb);
  EXPECT_EQ(off.legs[3].cached_prompt_tokens, 0);
  EXPECT_EQ(on.kv.tiers.onboarded_blocks[static_cast<int>(kv::Tier::kHost)], 6);
  // ...and the transfer read them from the host tier, not from the device pool; the
  // pins went with the claim.
  EXPECT_EQ(on.kv.tiers.served_blocks, 6);
  EXPECT_EQ(on.kv.tiers.pinned_blocks, 0);
  EXPECT_EQ(off.kv.tiers.served_blocks, 0);
}

}  // namespace
}  // namespace lockstep::exec
