// Every sampling option reaches every rank: through the real executor, KV manager and
// CPU engine (the tiny MoE model, experts split over the ranks), a DEP4 instance
// serving requests pinned round-robin to its four ranks, each with logit_bias,
// presence/frequency/repetition penalties, min_tokens (against a stop set that covers a
// quarter of the vocabulary), some continuations (num_generated_in_prompt) and greedy
// or seeded sampling, gives exactly the tokens a 1-rank instance gives for the same
// requests. The requests without those options give other tokens, so the options are
// seen (a rank that dropped them would differ).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/executor/executor.h"
#include "tests/executor/outcome_sink.h"

namespace lockstep::exec {
namespace {

using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kTpb = 8;
constexpr int kRequests = 12;
constexpr int kMaxTokens = 12;
constexpr int kMinTokens = 5;

using Sink = OutcomeSink;

// One instance of `ranks` ranks of the tiny MoE model (expert parallel over the ranks).
class Instance {
 public:
  explicit Instance(int ranks) {
    const std::string dir = PresetModelDir("tiny-moe");
    executor_group_ = comm::MakeInProcessGroup(ranks);
    engine_group_ = comm::MakeInProcessGroup(ranks);
    for (int r = 0; r < ranks; ++r) {
      ExecutorConfig config;
      config.instance = "sampling";
      config.rank = r;
      config.world_size = ranks;
      config.audit_every_step = true;
      config.scheduler.max_batch_size = 8;
      config.scheduler.max_num_active_requests = kRequests;
      config.scheduler.max_num_tokens = 512;
      config.scheduler.chunk_size = 64;
      config.kv.target.layout = *engine::ModelBlockLayout(dir, kTpb);
      config.kv.target.num_blocks = 128;
      config.kv.dummy_reserved_tokens = 1;
      absl::StatusOr<std::unique_ptr<kv::KvManager>> kv = kv::KvManager::Create(config.kv);
      LOCKSTEP_CHECK_OK(kv.status());
      engine::CpuEngineOptions e;
      e.model_dir = dir;
      e.target_storage = reinterpret_cast<float*>((*kv)->Storage(kv::PoolKind::kTarget));
      e.target_layout = config.kv.target.layout;
      e.target_num_blocks = config.kv.target.num_blocks;
      e.communicator = ranks > 1 ? engine_group_[r].get() : nullptr;
      e.rank = r;
      e.world_size = ranks;
      absl::StatusOr<std::unique_ptr<engine::ModelEngine>> engine = engine::CreateCpuEngine(e);
      LOCKSTEP_CHECK_OK(engine.status());
      engines_.push_back(*std::move(engine));
      Executor::Deps deps;
      deps.comm = executor_group_[r].get();
      deps.engine = engines_.back().get();
      deps.kv = *std::move(kv);
      deps.clock = SystemClock::Get();
      deps.sink = r == 0 ? &sink_ : nullptr;
      absl::StatusOr<std::unique_ptr<Executor>> executor =
          Executor::Create(config, std::move(deps));
      LOCKSTEP_CHECK_OK(executor.status());
      executors_.push_back(*std::move(executor));
    }
  }

  // Submits `specs` to the leader and steps every rank, each on its own thread (the
  // owner of its state), until all finished; the outcomes in submission order. After
  // each step the ranks meet, and the last to arrive decides for all whether to go on.
  std::vector<Outcome> Run(const std::vector<NewRequestSpec>& specs) {
    for (const NewRequestSpec& s : specs) executors_[0]->inbox().Push(s);
    const int n = static_cast<int>(executors_.size());
    absl::Mutex mu;
    int arrived = 0;
    int64_t round = 0;
    bool stop = false;
    std::vector<std::string> problems;
    auto done = [&] {
      for (const NewRequestSpec& s : specs) {
        if (!sink_.outcomes[s.id].finished) return false;
      }
      return true;
    };
    auto rank_loop = [&](int r) {
      for (int step = 0;; ++step) {
        const absl::Status status = executors_[r]->Step();
        const std::vector<std::string> audit = executors_[r]->Audit();
        absl::MutexLock lock(&mu);
        if (!status.ok()) problems.push_back(absl::StrCat("rank ", r, ": ", status.ToString()));
        for (const std::string& a : audit) problems.push_back(absl::StrCat("rank ", r, ": ", a));
        if (++arrived == n) {
          arrived = 0;
          ++round;
          stop = !problems.empty() || step + 1 >= 1000 || done();
        } else {
          const int64_t mine = round;
          auto next = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return round != mine; };
          LOCKSTEP_CHECK(mu.AwaitWithTimeout(absl::Condition(&next), absl::Seconds(120)))
              << "rank " << r << ": the other ranks did not finish step " << step;
        }
        if (stop) return;
      }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back(rank_loop, r);
    for (std::thread& t : threads) t.join();
    EXPECT_THAT(problems, ::testing::IsEmpty());
    EXPECT_TRUE(done()) << "not finished after 1000 steps";
    std::vector<Outcome> out;
    for (const NewRequestSpec& s : specs) out.push_back(sink_.outcomes[s.id]);
    return out;
  }

 private:
  std::vector<std::unique_ptr<comm::Communicator>> executor_group_;
  std::vector<std::unique_ptr<comm::Communicator>> engine_group_;
  std::vector<std::unique_ptr<engine::ModelEngine>> engines_;
  std::vector<std::unique_ptr<Executor>> executors_;  // destroyed before their engines
  Sink sink_;
};

// kRequests requests with every history-dependent option set, drawn from `seed`.
std::vector<NewRequestSpec> Requests(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> stop;
  for (int32_t t = 0; t < 256; t += 4) stop.push_back(t);
  std::vector<NewRequestSpec> specs(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    NewRequestSpec& s = specs[i];
    s.id = RequestId(i + 1);
    s.prompt = {engine::kByteBosToken};
    for (int p = 8 + static_cast<int>(rng() % 24); p > 0; --p) {
      s.prompt.push_back(static_cast<int32_t>(rng() % 256));
    }
    sched::SamplingParams& o = s.sampling;
    o.max_tokens = kMaxTokens;
    o.seed = rng();
    if (i % 2 == 1) {  // every other request samples
      o.temperature = 0.8f;
      o.top_k = 40;
      o.top_p = 0.9f;
    }
    o.stop_token_ids = stop;
    o.min_tokens = kMinTokens;
    o.presence_penalty = 0.5f + 0.1f * static_cast<float>(i % 5);
    o.frequency_penalty = 0.3f + 0.1f * static_cast<float>(i % 3);
    o.repetition_penalty = 1.2f + 0.05f * static_cast<float>(i % 4);
    for (int b = 0; b < 4; ++b) {
      o.logit_bias.emplace_back(static_cast<int32_t>(1 + (rng() % 255)), b % 2 == 0 ? 4.0f : -4.0f);
    }
    o.num_generated_in_prompt = i % 3;  // a continuation of a migrated request
  }
  return specs;
}

// `specs` without the options under test.
std::vector<NewRequestSpec> WithoutOptions(std::vector<NewRequestSpec> specs) {
  for (NewRequestSpec& s : specs) {
    sched::SamplingParams& o = s.sampling;
    o.presence_penalty = o.frequency_penalty = 0.0f;
    o.repetition_penalty = 1.0f;
    o.min_tokens = 0;
    o.logit_bias.clear();
    o.num_generated_in_prompt = 0;
  }
  return specs;
}

TEST(SamplingEquivalenceTest, Dep4GivesTheTokensOfOneRank) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  const std::vector<NewRequestSpec> specs = Requests(seed);
  std::vector<NewRequestSpec> pinned = specs;
  for (int i = 0; i < kRequests; ++i) pinned[i].pinned_rank = i % 4;

  const std::vector<Outcome> one = Instance(1).Run(specs);
  const std::vector<Outcome> dep4 = Instance(4).Run(pinned);
  const std::vector<Outcome> plain = Instance(1).Run(WithoutOptions(specs));

  absl::flat_hash_set<int32_t> ranks;
  int differ_without_options = 0;
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    ASSERT_THAT(one[i].status, IsOk());
    ASSERT_THAT(dep4[i].status, IsOk());
    EXPECT_GE(one[i].tokens.size(), static_cast<size_t>(kMinTokens - i % 3));
    EXPECT_EQ(dep4[i].tokens, one[i].tokens);
    EXPECT_EQ(dep4[i].rank, i % 4);
    ranks.insert(dep4[i].rank);
    differ_without_options += plain[i].tokens != one[i].tokens;
  }
  std::printf("%d of %d requests give other tokens without the options\n", differ_without_options,
              kRequests);
  EXPECT_EQ(ranks.size(), 4u) << "requests ran on every rank";
  EXPECT_GE(differ_without_options, kRequests / 2)
      << "the options must change the output for this test to see them";
}

}  // namespace
}  // namespace lockstep::exec
