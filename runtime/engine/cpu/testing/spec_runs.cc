#include "runtime/engine/cpu/testing/spec_runs.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/test_engine.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"

namespace lockstep::engine::testing {

std::vector<HostRequest> SpecPrompts(int n, uint64_t seed, int max_tokens, bool stochastic,
                                     bool repeating) {
  std::mt19937_64 rng(seed);
  std::vector<HostRequest> requests;
  for (int i = 0; i < n; ++i) {
    HostRequest request;
    request.id = i;
    request.prompt.push_back(kByteBosToken);
    const int length = 8 + static_cast<int>(rng() % 40);
    std::vector<int32_t> span;
    if (repeating) {
      span.resize(2 + rng() % 6);
      for (int32_t& t : span) t = static_cast<int32_t>(rng() % 256);
    }
    for (int t = 1; t < length; ++t) {
      request.prompt.push_back(repeating && i % 2 == 0 ? span[t % span.size()]
                                                       : static_cast<int32_t>(rng() % 256));
    }
    request.sampling.max_tokens = max_tokens;
    request.sampling.ignore_eos = true;
    if (stochastic) {
      request.sampling.temperature = 1.0f;
      request.sampling.top_k = 40;
      request.sampling.seed = rng();
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

std::string SpecRun::ToString() const {
  return absl::StrCat(spec::MethodName(method), " K=", k, dynamic ? " dynamic" : "",
                      overlap ? " overlap" : "");
}

SpecRunOutput RunSpec(const std::string& dir, const SpecRun& run,
                      const std::vector<HostRequest>& requests, uint64_t seed) {
  const bool draft_model = run.method == spec::Method::kDraftModel && run.k > 0;
  TestEngine engine = MakeTestEngine({.model_dir = dir,
                                      .draft_dir = !draft_model            ? ""
                                                   : run.draft_dir.empty() ? JoinPath(dir, "draft")
                                                                           : run.draft_dir,
                                      .num_draft_tokens = run.k,
                                      .spec_method = run.method,
                                      .num_blocks = 2048,
                                      .pool_seed = seed});
  MiniHost host(
      engine.engine.get(), engine.target.get(), engine.draft.get(),
      {.chunk_size = 24,
       .max_batch = 16,
       .num_draft_tokens = run.k,
       .spec_method = run.method == spec::Method::kNone ? spec::Method::kDraftModel : run.method,
       .dynamic = run.dynamic,
       .overlap = run.overlap});
  for (const HostRequest& request : requests) host.Add(request);
  LOCKSTEP_CHECK_OK(host.Run());
  EXPECT_TRUE(host.pools_clean()) << "the engine wrote outside its grant or into a free block ("
                                  << run.ToString() << ")";
  SpecRunOutput out;
  for (const HostRequest& request : requests) {
    const HostOutput& o = host.output(request.id);
    out.tokens.push_back(o.tokens);
    out.proposed += o.proposed;
    out.accepted += o.accepted;
    out.steps += o.steps;
  }
  return out;
}

}  // namespace lockstep::engine::testing
