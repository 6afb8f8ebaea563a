#include "tools/bench/multi_turn.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/router.grpc.pb.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::bench {
namespace {

// One streaming Generate of `prompt`; fills the outcome and `reply`.
void RunTurn(v1::RouterService::Stub& stub, const MultiTurnOptions& o,
             const std::vector<int32_t>& prompt, const PlannedTurn& planned, TurnOutcome& out,
             std::vector<int32_t>& reply) {
  v1::RouterGenerateRequest request;
  request.set_model(o.model);
  request.mutable_tokens()->mutable_ids()->Assign(prompt.begin(), prompt.end());
  v1::SamplingParams* sampling = request.mutable_sampling();
  sampling->set_max_tokens(static_cast<int32_t>(planned.max_tokens));
  sampling->set_temperature(0);
  sampling->set_seed(planned.seed);
  sampling->set_ignore_eos(true);
  grpc::ClientContext call;
  call.set_deadline(absl::ToChronoTime(absl::Now() + o.request_timeout));
  if (!o.api_key.empty()) call.AddMetadata("authorization", "Bearer " + o.api_key);
  const absl::Time start = absl::Now();
  std::unique_ptr<grpc::ClientReader<v1::RouterGenerateResponse>> reader =
      stub.Generate(&call, request);
  v1::RouterGenerateResponse response;
  bool first = true;
  bool finished = false;
  while (reader->Read(&response)) {
    if (first && response.token_ids_size() > 0) {
      out.ttft = absl::Now() - start;
      first = false;
    }
    reply.insert(reply.end(), response.token_ids().begin(), response.token_ids().end());
    if (response.finished()) {
      finished = true;
      out.cached_tokens = response.cached_prompt_tokens();
    }
  }
  const grpc::Status status = reader->Finish();
  out.latency = absl::Now() - start;
  if (first) out.ttft = out.latency;
  out.prompt_tokens = static_cast<int64_t>(prompt.size());
  out.output_tokens = static_cast<int64_t>(reply.size());
  if (!status.ok()) {
    out.error =
        absl::StrCat("gRPC ", static_cast<int>(status.error_code()), ": ", status.error_message());
  } else if (!finished || reply.empty()) {
    out.error = "the stream ended without a final response or tokens";
  }
  out.ok = out.error.empty();
}

}  // namespace

// Letters as token ids: valid in any byte-level vocabulary.
MultiTurnPlan MakeMultiTurnPlan(const MultiTurnOptions& o) {
  std::mt19937_64 rng(o.seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return lo +
           static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, hi - lo + 1)));
  };
  auto letters = [&](int64_t n) {
    std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(0, n)));
    for (int32_t& t : out) t = static_cast<int32_t>('a' + rng() % 26);
    return out;
  };
  // The pauses have a stream of their own: the prompts do not depend on them.
  std::mt19937_64 think_rng(o.seed ^ 0x7468696e6b696e67ULL);
  const uint64_t think_range_us =
      2 * static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Microseconds(o.mean_think)));
  MultiTurnPlan plan;
  plan.system = letters(o.system_tokens);
  for (int64_t u = 0; u < o.users; ++u) {
    std::vector<PlannedTurn>& turns = plan.users.emplace_back();
    for (int64_t t = uniform(o.min_turns, o.max_turns); t > 0; --t) {
      PlannedTurn turn;
      turn.user = letters(uniform(o.min_user_tokens, o.max_user_tokens));
      turn.max_tokens = uniform(o.min_output_tokens, o.max_output_tokens);
      turn.seed = rng();
      if (!turns.empty() && think_range_us > 0) {
        turn.think = absl::Microseconds(static_cast<int64_t>(think_rng() % (think_range_us + 1)));
      }
      turns.push_back(std::move(turn));
    }
  }
  return plan;
}

int64_t IdealReusedTokens(int64_t prompt_tokens, int64_t cached_tokens, int tokens_per_block) {
  const int64_t tpb = std::max(1, tokens_per_block);
  return std::max<int64_t>(0, std::min(cached_tokens, prompt_tokens - 1)) / tpb * tpb;
}

int64_t PublishedTokens(int64_t prompt_tokens, int64_t reply_tokens, bool replies_published) {
  if (!replies_published) return prompt_tokens;
  return prompt_tokens + std::max<int64_t>(0, reply_tokens - 2);
}

MultiTurnResult RunMultiTurn(const MultiTurnOptions& options) {
  const MultiTurnPlan plan = MakeMultiTurnPlan(options);
  int64_t total_turns = 0;
  for (const auto& turns : plan.users) total_turns += static_cast<int64_t>(turns.size());
  const std::shared_ptr<grpc::Channel> channel = security::CreateChannel(options.grpc_address);
  MultiTurnResult result;
  absl::Mutex mu;
  std::atomic<int64_t> next_user{0}, done{0}, failed{0};
  std::atomic<bool> any_finished{false};
  const absl::Time start = absl::Now();
  auto conversation = [&](int64_t u, v1::RouterService::Stub& stub) {
    std::vector<int32_t> context = plan.system;
    int64_t cached = 0;  // leading tokens of `context` the workers published (the last turn)
    for (size_t t = 0; t < plan.users[u].size(); ++t) {
      const PlannedTurn& planned = plan.users[u][t];
      if (planned.think > absl::ZeroDuration()) absl::SleepFor(planned.think);
      context.insert(context.end(), planned.user.begin(), planned.user.end());
      if (t == 0 && any_finished.load()) cached = static_cast<int64_t>(plan.system.size());
      TurnOutcome out;
      out.user = u;
      out.turn = static_cast<int64_t>(t) + 1;
      out.ideal_reused_tokens =
          IdealReusedTokens(static_cast<int64_t>(context.size()), cached, options.tokens_per_block);
      std::vector<int32_t> reply;
      RunTurn(stub, options, context, planned, out, reply);
      const bool ok = out.ok;
      {
        absl::MutexLock lock(&mu);
        result.turns.push_back(std::move(out));
      }
      ++done;
      if (!ok) {
        ++failed;
        done += static_cast<int64_t>(plan.users[u].size() - t - 1);  // the rest is skipped
        return;
      }
      any_finished.store(true);
      cached = PublishedTokens(static_cast<int64_t>(context.size()),
                               static_cast<int64_t>(reply.size()), options.replies_published);
      context.insert(context.end(), reply.begin(), reply.end());
    }
  };
  std::vector<std::thread> clients;
  const int64_t threads = std::clamp<int64_t>(options.concurrency, 1, options.users);
  for (int64_t c = 0; c < threads; ++c) {
    clients.emplace_back([&] {
      auto stub = v1::RouterService::NewStub(channel);
      for (int64_t u = next_user++; u < options.users; u = next_user++) conversation(u, *stub);
    });
  }
  if (options.progress) {
    int64_t shown = -1;
    while (done.load() < total_turns) {
      const int64_t tenth = total_turns > 0 ? 10 * done.load() / total_turns : 10;
      if (tenth != shown) {
        std::fprintf(stderr, "  %lld/%lld turns, %lld failed, %.1f s\n",
                     static_cast<long long>(done.load()), static_cast<long long>(total_turns),
                     static_cast<long long>(failed.load()),
                     absl::ToDoubleSeconds(absl::Now() - start));
        shown = tenth;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  for (std::thread& t : clients) t.join();
  result.wall = absl::Now() - start;
  return result;
}

}  // namespace lockstep::bench
