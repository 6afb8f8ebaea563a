#include "runtime/engine/cpu/testing/rank_group_run.h"

#include <utility>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::engine::testing {
namespace {

using ::lockstep::testing::IsOk;

std::vector<HostRequest> RandomRequests(int n, int first_id, int prompt_spread, int min_tokens,
                                        std::mt19937_64& rng) {
  std::vector<HostRequest> requests;
  for (int i = 0; i < n; ++i) {
    HostRequest request;
    request.id = first_id + i;
    request.prompt.push_back(kByteBosToken);
    const int length = 4 + static_cast<int>(rng() % prompt_spread);
    for (int t = 1; t < length; ++t) request.prompt.push_back(static_cast<int32_t>(rng() % 256));
    request.sampling.max_tokens = min_tokens + static_cast<int32_t>(rng() % min_tokens);
    request.sampling.logprobs = 1;
    request.sampling.ignore_eos = true;
    if (i % 2 == 1) {
      request.sampling.temperature = 0.7f;
      request.sampling.seed = rng();
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

}  // namespace

std::vector<std::vector<HostRequest>> RequestsPerRank(const std::vector<int>& per_rank,
                                                      int prompt_spread, int min_tokens,
                                                      std::mt19937_64& rng) {
  std::vector<std::vector<HostRequest>> requests(per_rank.size());
  for (size_t r = 0; r < per_rank.size(); ++r) {
    requests[r] =
        RandomRequests(per_rank[r], 1000 * static_cast<int>(r + 1), prompt_spread, min_tokens, rng);
  }
  return requests;
}

void RunRankGroupAgainstOneEngine(const RankGroupRun& run,
                                  const std::vector<comm::Communicator*>& group,
                                  const std::vector<std::vector<HostRequest>>& requests,
                                  std::vector<std::vector<HostOutput>>& outputs) {
  const int ranks = static_cast<int>(group.size());
  ASSERT_EQ(requests.size(), group.size());
  TestEngine solo = MakeTestEngine({.model_dir = run.model_dir, .pool_seed = run.seed});
  MiniHost solo_host(solo.engine.get(), solo.target.get(), nullptr,
                     {.chunk_size = 16, .max_batch = 4});
  for (const auto& rank_requests : requests) {
    for (const HostRequest& request : rank_requests) solo_host.Add(request);
  }
  ASSERT_THAT(solo_host.Run(), IsOk());

  std::vector<TestEngine> engines;
  std::vector<std::unique_ptr<MiniHost>> hosts;
  for (int r = 0; r < ranks; ++r) {
    engines.push_back(MakeTestEngine({.model_dir = run.model_dir,
                                      .draft_dir = run.draft_dir,
                                      .num_draft_tokens = run.num_draft_tokens,
                                      .spec_method = run.spec_method,
                                      .tokens_per_block = 4 + r,
                                      .communicator = group[r],
                                      .rank = r,
                                      .world_size = ranks,
                                      .pool_seed = run.seed + r}));
    if (run.num_draft_tokens > 0 && run.spec_method != spec::Method::kNgram) {
      ASSERT_NE(engines[r].draft, nullptr) << "rank " << r;
    }
    hosts.push_back(std::make_unique<MiniHost>(engines[r].engine.get(), engines[r].target.get(),
                                               engines[r].draft.get(),
                                               HostOptions{.chunk_size = 8 + 5 * r,
                                                           .max_batch = 1 + r,
                                                           .num_draft_tokens = run.num_draft_tokens,
                                                           .spec_method = run.spec_method,
                                                           .dummy_id = -1 - r}));
    for (const HostRequest& request : requests[r]) hosts[r]->Add(request);
  }
  for (int step = 0;; ++step) {
    ASSERT_LT(step, 1000);
    bool all_done = true;
    for (const auto& host : hosts) all_done = all_done && host->Done();
    if (all_done) break;
    for (auto& host : hosts) ASSERT_THAT(host->Launch(/*pad=*/true), IsOk());
    for (auto& host : hosts) ASSERT_THAT(host->Collect(), IsOk());
    if (run.after_step) {
      run.after_step(step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  outputs.assign(ranks, {});
  for (int r = 0; r < ranks; ++r) {
    EXPECT_TRUE(hosts[r]->pools_clean()) << "rank " << r;
    for (const HostRequest& request : requests[r]) {
      const HostOutput& got = hosts[r]->output(request.id);
      const HostOutput& want = solo_host.output(request.id);
      EXPECT_EQ(got.tokens, want.tokens) << "rank " << r << " request " << request.id;
      ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
      for (size_t t = 0; t < want.logprobs.size(); ++t) {
        EXPECT_EQ(got.logprobs[t][0].logprob, want.logprobs[t][0].logprob)
            << "rank " << r << " request " << request.id << " token " << t;
      }
      if (run.drafts_for_itself && request.sampling.greedy()) {
        EXPECT_EQ(got.accepted, got.proposed) << "a model drafting for itself is always right";
      }
      outputs[r].push_back(got);
    }
  }
}

}  // namespace lockstep::engine::testing
