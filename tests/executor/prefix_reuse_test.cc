// Prefix reuse through real executors (fake engine) in every draft mode: no draft, a
// paired draft pool, an unpaired one (whose tree lost part of the shared prefix, so the
// draft model prefills the gap), and the n-gram drafter. Requests share a system prompt
// and arrive one after another and two at once; the audit holds after every step, the
// tokens are the engine's, the fake engine finds every reused prefix with its draft KV,
// and the rank counts exactly the tokens it reused, in total and in each request's
// responses.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec_decode/speculative_config.h"
#include "tests/executor/cluster.h"
#include "tests/executor/scenario.h"

namespace lockstep::testing {
namespace {

struct Mode {
  const char* name;
  kv::DraftMode draft_mode;
  spec::Method method;
  int32_t draft_blocks;  // 0: as many as the target pool
};

std::vector<int32_t> Tokens(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((seed * 37 + i * 11) % 256);
  return t;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class PrefixReuseTest : public ::testing::TestWithParam<Mode> {};

TEST_P(PrefixReuseTest, SharedPrefixesAreReusedInEveryPoolAndOutputsStayExact) {
  const Mode& mode = GetParam();
  ClusterOptions o = Base(2);
  o.scheduler.prefix_reuse = true;
  o.scheduler.chunk_size = 256;
  if (mode.method != spec::Method::kNone) {
    o = WithDraft(o, mode.draft_mode, 3);
    o.scheduler.speculative.method = mode.method;
  }
  o.draft_num_blocks = mode.draft_blocks;
  ScriptedCluster c(o);

  const std::vector<int32_t> system = Tokens(32, 1);  // 8 blocks of 4
  auto spec = [&](int64_t id, std::vector<int32_t> prompt, int max_tokens = 8) {
    exec::NewRequestSpec s = c.MakeRequest(id, 1, max_tokens, /*pinned_rank=*/0);
    s.prompt = std::move(prompt);
    return s;
  };
  std::vector<exec::NewRequestSpec> all;
  auto run = [&](std::vector<exec::NewRequestSpec> specs) {
    for (const exec::NewRequestSpec& s : specs) {
      c.Submit(s);
      all.push_back(s);
    }
    ASSERT_NO_FATAL_FAILURE(RunToEnd(c, static_cast<int64_t>(all.size())));
  };
  // A; an unrelated long request X, prefill only (with the small unpaired draft pool,
  // 27 blocks and one reserved for the dummy, its mirror of 20 blocks evicts exactly the
  // three deepest blocks of A's chain from the draft tree); B reuses the system prompt
  // (its mirror one block less: the draft prefills positions [28, 32) first); C and D,
  // identical, at once; E, C's prompt again.
  const std::vector<int32_t> c_prompt = Concat(system, Tokens(9, 4));
  ASSERT_NO_FATAL_FAILURE(run({spec(1, Concat(system, Tokens(9, 2)))}));
  ASSERT_NO_FATAL_FAILURE(run({spec(2, Tokens(77, 9), /*max_tokens=*/1)}));
  ASSERT_NO_FATAL_FAILURE(run({spec(3, Concat(system, Tokens(9, 3)))}));
  const kv::ManagerStats after_b = c.rank(0).kv().Stats();
  ASSERT_NO_FATAL_FAILURE(run({spec(4, c_prompt), spec(5, c_prompt)}));
  ASSERT_NO_FATAL_FAILURE(run({spec(6, c_prompt)}));

  for (const exec::NewRequestSpec& s : all) {
    const Stream st = c.stream(s.id);
    EXPECT_EQ(st.num_finished, 1) << "request " << s.id;
    EXPECT_TRUE(st.status.ok()) << "request " << s.id << ": " << st.status;
    EXPECT_EQ(st.tokens, c.ExpectedTokens(s)) << "request " << s.id;
  }
  const exec::ExecutorCounters& counters = c.rank(0).counters();
  EXPECT_EQ(counters.engine_failures, 0) << "the fake engine found KV it did not expect";
  EXPECT_EQ(counters.paused, 0);
  EXPECT_EQ(counters.context_tokens, 5 * 41 + 77);
  // B, C and D reuse the system prompt; E all of C's prompt but its last token.
  EXPECT_EQ(counters.reused_tokens, 3 * 32 + 40);
  const std::vector<int64_t> cached = {0, 0, 32, 32, 32, 40};  // per request, A..E
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(c.stream(all[i].id).cached_prompt_tokens, cached[i]) << "request " << all[i].id;
  }
  const kv::ManagerStats stats = c.rank(0).kv().Stats();
  EXPECT_EQ(stats.reused_tokens, counters.reused_tokens);
  if (mode.draft_mode == kv::DraftMode::kUnpaired) {
    EXPECT_EQ(after_b.mirror_reused_tokens, 28) << "B's mirror: one block short of 32";
    EXPECT_EQ(stats.mirror_reused_tokens, 28 + 32 + 32 + 40);
  }
  EXPECT_EQ(c.rank(1).counters().context_tokens, 0);
  ExpectBaseline(c);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, PrefixReuseTest,
    ::testing::Values(Mode{"none", kv::DraftMode::kNone, spec::Method::kNone, 0},
                      Mode{"paired", kv::DraftMode::kPaired, spec::Method::kDraftModel, 0},
                      Mode{"unpaired", kv::DraftMode::kUnpaired, spec::Method::kDraftModel, 28},
                      Mode{"ngram", kv::DraftMode::kNone, spec::Method::kNgram, 0}),
    [](const ::testing::TestParamInfo<Mode>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep::testing
