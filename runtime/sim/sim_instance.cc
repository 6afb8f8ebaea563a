#include "runtime/sim/sim_instance.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/transfer/fake_transceiver.h"

namespace lockstep::sim {
namespace {

// The collective faults of SimConfig::faults.
std::vector<comm::FaultRule> FaultRules(const SimConfig& config) {
  std::vector<comm::FaultRule> rules;
  for (const SimFault& f : config.faults) {
    if (f.kind == SimFault::Kind::kVeto) {
      // This rank reports an empty batch: the whole fleet skips the forward.
      rules.push_back(
          comm::FaultRule::Mutate(f.rank, "vote", f.step, [](absl::Span<int64_t> v) { v[0] = 1; }));
    } else {
      rules.push_back(comm::FaultRule::Delay(f.rank, "loads", f.step, f.delay));
    }
  }
  return rules;
}

}  // namespace

engine::FakeEngineOptions SimEngineOptions(const SimConfig& config) {
  engine::FakeEngineOptions options;
  options.draft_acceptance = config.draft_acceptance;
  options.draft_seed = config.seed;
  options.threaded = config.threaded_engine;
  options.tokens_per_block = config.tokens_per_block;
  options.target_num_blocks = config.num_blocks;
  options.draft_num_blocks =
      config.draft_mode == kv::DraftMode::kNone ? 0 : config.draft_num_blocks;
  options.spec_method = config.scheduler.speculative.method;
  options.ngram_max = config.scheduler.speculative.ngram_max;
  return options;
}

RankStackOptions SimRankStackOptions(const SimConfig& config, const std::string& name,
                                     exec::ResponseSink* sink,
                                     std::vector<comm::FaultRule> extra_faults) {
  RankStackOptions options;
  options.ranks = config.ranks;
  options.executor.instance = name;
  options.executor.role = config.role;
  options.executor.scheduler = config.scheduler;
  options.executor.kv = FakeKvConfig(config.scheduler, config.draft_mode, config.tokens_per_block,
                                     config.num_blocks, config.draft_num_blocks);
  options.executor.kv.tiers.host_bytes =
      int64_t{config.host_tier_blocks} *
      static_cast<int64_t>(options.executor.kv.target.layout.BlockBytes());
  options.executor.collective_timeout = absl::Seconds(60);
  options.executor.engine_timeout = absl::Seconds(60);
  options.executor.transfer_deadline = config.transfer_deadline;
  // The executor's own audit also compares the pools across every unforwarded step.
  options.executor.audit_every_step = config.audit;
  options.engine = SimEngineOptions(config);
  options.track_block_writes = true;
  options.transceiver = [&config](int r) {
    transfer::FakeTransceiverOptions t;
    t.seed = config.seed * 131 + static_cast<uint64_t>(r);
    t.min_latency = config.transfer_min_latency;
    t.max_latency = config.transfer_max_latency;
    t.failure_rate = config.transfer_failure_rate;
    t.transport = config.transfer_transport;
    t.send_refusal_rate = config.send_refusal_rate;
    return t;
  };
  options.faults = FaultRules(config);
  for (comm::FaultRule& f : extra_faults) options.faults.push_back(std::move(f));
  options.sink = sink;
  options.make_group = config.make_group;
  return options;
}

std::vector<std::string> PoolsNotAtBaseline(const exec::Executor& e) {
  std::vector<std::string> problems;
  const kv::ManagerStats kv = e.kv().Stats();
  if (kv.target.used_blocks != 0 || kv.target.num_caches != 0) {
    problems.push_back(absl::StrCat("target pool not at baseline: ", kv.target.used_blocks,
                                    " blocks in ", kv.target.num_caches, " caches"));
  }
  if (kv.draft && (kv.draft->used_blocks != 0 || kv.draft->num_caches != 0)) {
    problems.push_back(absl::StrCat("draft pool not at baseline: ", kv.draft->used_blocks,
                                    " blocks in ", kv.draft->num_caches, " caches"));
  }
  return problems;
}

}  // namespace lockstep::sim
