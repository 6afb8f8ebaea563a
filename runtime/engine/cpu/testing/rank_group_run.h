// The fixture of the expert-parallel engine tests: random requests per rank, and a group
// of CPU engines in lockstep (one per rank, each with its own block size, prefill chunk,
// batch size and pad dummy; a rank may have no requests and only pad) serving them
// against one engine that serves every request with plain decoding. The group must give
// the same tokens and bitwise the same log-probabilities, and return every pool block.
//
// One test thread drives it.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_RANK_GROUP_RUN_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_RANK_GROUP_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::engine::testing {

// For each rank r, per_rank[r] requests with ids from 1000 * (r + 1): a prompt of BOS
// and 3 to prompt_spread + 2 random bytes, min_tokens to 2 * min_tokens - 1 tokens past
// EOS with one log-probability each; every second request samples at T = 0.7 with a
// seed of its own, the others are greedy.
std::vector<std::vector<HostRequest>> RequestsPerRank(const std::vector<int>& per_rank,
                                                      int prompt_spread, int min_tokens,
                                                      std::mt19937_64& rng);

struct RankGroupRun {
  std::string model_dir;
  std::string draft_dir;  // the draft model (empty: none, or the model's MTP layer)
  spec::Method spec_method = spec::Method::kDraftModel;
  int num_draft_tokens = 0;  // K of every rank (the reference decodes plainly)
  uint64_t seed = 1;         // block allocation orders: seed (reference), seed + r (rank r)
  // The draft model is the target itself: every greedy request accepts every draft.
  bool drafts_for_itself = false;
  // Called after every step of the group, once every rank has collected it.
  std::function<void(int step)> after_step;
};

// The communicators of `group`, in rank order.
template <typename C>
std::vector<comm::Communicator*> Members(const std::vector<std::unique_ptr<C>>& group) {
  std::vector<comm::Communicator*> members;
  for (const auto& member : group) members.push_back(member.get());
  return members;
}

// Serves requests[r] on rank r of `group` (one communicator per rank, rank order) and
// every request on one single-rank engine, and expects what the header says. Fills
// `outputs` with each rank's outputs, in the order of its requests. Call it with
// ASSERT_NO_FATAL_FAILURE: it stops at the first fatal failure.
void RunRankGroupAgainstOneEngine(const RankGroupRun& run,
                                  const std::vector<comm::Communicator*>& group,
                                  const std::vector<std::vector<HostRequest>>& requests,
                                  std::vector<std::vector<HostOutput>>& outputs);

}  // namespace lockstep::engine::testing

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_RANK_GROUP_RUN_H_
