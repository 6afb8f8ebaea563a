// comm_bench: latency of a small all-reduce (the executor's step vote) and throughput
// of a MoE-sized all-to-all-v, for InProcessCommunicator (threads) and
// GlooCommunicator (one process per rank over loopback TCP), next to the raw gloo
// calls (gloo::AllreduceOptions / AlltoallvOptions used directly) in the same
// processes and the same run.
//
//   bazel run -c opt //runtime/comm:comm_bench [-- --iters=3000 --moe_iters=100]
//
// Rank processes re-execute this binary (testing/rank_processes.h); rank 0 prints.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/context.h"
#include "gloo/math.h"
#include "gloo/rendezvous/file_store.h"
#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/comm/testing/rank_processes.h"

namespace lockstep::comm {
namespace {

using Clock = std::chrono::steady_clock;

// MoE-like all-to-all-v: tokens per rank x hidden size floats, spread over the ranks.
constexpr int64_t kMoeTokens = 512;
constexpr int64_t kMoeHidden = 1024;

struct Stats {
  double p10_us = 0;
  double median_us = 0;
  double p99_us = 0;
  double mean_us = 0;
};

Stats Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  Stats s;
  s.p10_us = us[us.size() / 10];
  s.median_us = us[us.size() / 2];
  s.p99_us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  s.mean_us = std::accumulate(us.begin(), us.end(), 0.0) / us.size();
  return s;
}

template <typename Fn>
double TimeUs(Fn&& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

void Check(const absl::Status& status, absl::string_view what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", std::string(what).c_str(), status.ToString().c_str());
    std::exit(1);
  }
}

CallOptions Tag(absl::string_view tag) {
  CallOptions options;
  options.tag = tag;
  options.timeout = absl::Seconds(60);
  return options;
}

void PrintRow(absl::string_view impl, int world, int64_t n, const Stats& s) {
  std::printf(
      "%-24s ranks=%d n=%-2lld p10=%8.1f us  median=%8.1f us  p99=%8.1f us  mean=%8.1f us\n",
      std::string(impl).c_str(), world, static_cast<long long>(n), s.p10_us, s.median_us, s.p99_us,
      s.mean_us);
}

// Per-rank send counts (floats) of the MoE exchange: a slight deterministic skew.
std::vector<int64_t> MoeCounts(int from, int world) {
  std::vector<int64_t> tokens(world, kMoeTokens / world);
  tokens[(from + 1) % world] += kMoeTokens % world;
  std::vector<int64_t> counts;
  for (int64_t t : tokens) counts.push_back(t * kMoeHidden);
  return counts;
}

std::vector<int64_t> MoeRecvCounts(int to, int world) {
  std::vector<int64_t> counts(world);
  for (int s = 0; s < world; ++s) counts[s] = MoeCounts(s, world)[to];
  return counts;
}

double MoeBytesPerRank(int rank, int world) {
  const std::vector<int64_t> counts = MoeCounts(rank, world);
  return 4.0 * std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

// ---- In-process: ranks as threads of this process.

void RunInProcess(int world, int iters, int moe_iters) {
  for (int64_t n : {1, 8}) {
    auto group = MakeInProcessGroup(world);
    std::vector<double> rank0_us;
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        std::vector<int64_t> vote(n, r);
        for (int i = 0; i < iters; ++i) {
          const double us = TimeUs([&] {
            Check(group[r]->AllReduce(absl::MakeSpan(vote), ReduceOp::kMax, Tag("vote")),
                  "in-process AllReduce");
          });
          if (r == 0) rank0_us.push_back(us);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    PrintRow("in-process allreduce", world, n, Summarize(rank0_us));
  }
  auto group = MakeInProcessGroup(world);
  std::vector<double> rank0_us;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      std::vector<int64_t> send_counts = MoeCounts(r, world);
      std::vector<int64_t> recv_counts = MoeRecvCounts(r, world);
      std::vector<float> send(kMoeTokens * kMoeHidden, 1.0f);
      std::vector<float> recv(std::accumulate(recv_counts.begin(), recv_counts.end(), 0));
      for (int i = 0; i < moe_iters; ++i) {
        const double us = TimeUs([&] {
          Check(
              group[r]->AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, Tag("moe")),
              "in-process AllToAllV");
        });
        if (r == 0) rank0_us.push_back(us);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const Stats s = Summarize(rank0_us);
  std::printf("%-24s ranks=%d %lld tokens x %lld floats: median=%8.1f us  %6.2f GB/s per rank\n",
              "in-process alltoallv", world, static_cast<long long>(kMoeTokens),
              static_cast<long long>(kMoeHidden), s.median_us,
              MoeBytesPerRank(0, world) / (s.median_us * 1e3));
}

// ---- Gloo: this process is one rank. args: store directory, iterations.

void RunGlooRank(const testing::RankProcessRole& role) {
  const int rank = role.rank;
  const int world = role.world_size;
  int iters = 0;
  int moe_iters = 0;
  if (role.args.size() < 3 || !absl::SimpleAtoi(role.args[1], &iters) ||
      !absl::SimpleAtoi(role.args[2], &moe_iters)) {
    std::exit(2);
  }
  gloo::rendezvous::FileStore store(role.args[0]);

  GlooOptions options;
  options.rank = rank;
  options.world_size = world;
  options.store = &store;
  options.prefix = "bench";
  auto comm = GlooCommunicator::Create(options);
  Check(comm.status(), "GlooCommunicator::Create");

  // The raw baseline runs on the same gloo context (connections, event loop thread).
  const std::shared_ptr<gloo::Context>& raw = (*comm)->gloo_context();

  for (int64_t n : {1, 8}) {
    std::vector<int64_t> vote(n, rank);
    std::vector<double> raw_us;
    std::vector<double> wrapper_us;
    auto raw_allreduce = [&] {
      gloo::AllreduceOptions opts(raw);
      opts.setOutput(vote.data(), vote.size());
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<int64_t>));
      opts.setTag(0);
      gloo::allreduce(opts);
    };
    auto wrapper_allreduce = [&] {
      Check((*comm)->AllReduce(absl::MakeSpan(vote), ReduceOp::kMax, Tag("vote")),
            "gloo AllReduce");
    };
    for (int i = 0; i < 200; ++i) {  // Warm-up.
      raw_allreduce();
      wrapper_allreduce();
    }
    // Paired samples, alternating which goes first, so that the load of the machine
    // (shared, 2 cores) hits both alike.
    std::vector<double> pair_ratio;
    for (int i = 0; i < iters; ++i) {
      double r = 0;
      double w = 0;
      if (i % 2 == 0) {
        r = TimeUs(raw_allreduce);
        w = TimeUs(wrapper_allreduce);
      } else {
        w = TimeUs(wrapper_allreduce);
        r = TimeUs(raw_allreduce);
      }
      raw_us.push_back(r);
      wrapper_us.push_back(w);
      pair_ratio.push_back(w / r);
    }
    if (rank == 0) {
      const Stats r = Summarize(raw_us);
      const Stats w = Summarize(wrapper_us);
      PrintRow("raw gloo allreduce", world, n, r);
      PrintRow("GlooCommunicator", world, n, w);
      std::printf(
          "%-24s ranks=%d n=%-2lld wrapper/raw: median %.2f, p10 %.2f, mean %.2f, "
          "median of paired ratios %.2f\n",
          "ratio", world, static_cast<long long>(n), w.median_us / r.median_us, w.p10_us / r.p10_us,
          w.mean_us / r.mean_us, Summarize(pair_ratio).median_us);
    }
  }

  // Small variable-size ops: the header round alone (an AllGatherBytes of empty
  // strings), and the executor's intake broadcast and response gather at 200 bytes.
  auto series = [&](absl::string_view name, int64_t bytes, const std::function<void()>& fn) {
    std::vector<double> us;
    for (int i = 0; i < iters; ++i) us.push_back(TimeUs(fn));
    if (rank == 0) PrintRow(name, world, bytes, Summarize(us));
  };
  series("header round only", 0, [&] {
    Check((*comm)->AllGatherBytes("", Tag("header")).status(), "gloo AllGatherBytes");
  });
  const std::string payload(200, 'x');
  series("broadcast (bytes)", payload.size(), [&] {
    std::string intake = rank == 0 ? payload : "";
    Check((*comm)->Broadcast(&intake, 0, Tag("intake")), "gloo Broadcast");
  });
  series("gather (bytes)", payload.size(),
         [&] { Check((*comm)->Gather(payload, 0, Tag("responses")).status(), "gloo Gather"); });

  std::vector<int64_t> send_counts = MoeCounts(rank, world);
  std::vector<int64_t> recv_counts = MoeRecvCounts(rank, world);
  std::vector<float> send(kMoeTokens * kMoeHidden, 1.0f);
  std::vector<float> recv(std::accumulate(recv_counts.begin(), recv_counts.end(), 0));
  std::vector<double> raw_us;
  std::vector<double> wrapper_us;
  auto raw_alltoallv = [&] {
    gloo::AlltoallvOptions opts(raw);
    opts.setInput(send.data(), send_counts);
    opts.setOutput(recv.data(), recv_counts);
    opts.setTag(0);
    gloo::alltoallv(opts);
  };
  // The wrapper's header round synchronizes the ranks before the payload; this
  // baseline does the same with a raw one-int64 all-reduce.
  auto synced_raw_alltoallv = [&] {
    int64_t sync = 1;
    gloo::AllreduceOptions opts(raw);
    opts.setOutput(&sync, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<int64_t>));
    opts.setTag(0);
    gloo::allreduce(opts);
    raw_alltoallv();
  };
  auto wrapper_alltoallv = [&] {
    Check((*comm)->AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, Tag("moe")),
          "gloo AllToAllV");
  };
  std::vector<double> synced_us;
  for (int i = 0; i < moe_iters + 5; ++i) {
    // Rotate the order so that no variant always runs first.
    double times[3];
    for (int k = 0; k < 3; ++k) {
      const int which = (i + k) % 3;
      times[which] = TimeUs(which == 0   ? std::function<void()>(raw_alltoallv)
                            : which == 1 ? std::function<void()>(synced_raw_alltoallv)
                                         : std::function<void()>(wrapper_alltoallv));
    }
    if (i >= 5) {
      raw_us.push_back(times[0]);
      synced_us.push_back(times[1]);
      wrapper_us.push_back(times[2]);
    }
  }
  if (rank == 0) {
    for (auto [name, us] : {std::pair{"raw gloo alltoallv", &raw_us},
                            std::pair{"raw allreduce+alltoallv", &synced_us},
                            std::pair{"GlooCommunicator a2av", &wrapper_us}}) {
      const Stats s = Summarize(*us);
      std::printf(
          "%-24s ranks=%d %lld tokens x %lld floats: median=%8.1f us  %6.2f GB/s per rank\n", name,
          world, static_cast<long long>(kMoeTokens), static_cast<long long>(kMoeHidden),
          s.median_us, MoeBytesPerRank(0, world) / (s.median_us * 1e3));
    }
    std::printf("%-24s ranks=%d alltoallv wrapper/raw median %.2f, wrapper/(raw+sync) %.2f\n",
                "ratio", world, Summarize(wrapper_us).median_us / Summarize(raw_us).median_us,
                Summarize(wrapper_us).median_us / Summarize(synced_us).median_us);
  }
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  if (std::optional<testing::RankProcessRole> role = testing::GetRankProcessRole()) {
    RunGlooRank(*role);
    return 0;
  }
  int iters = 3000;
  int moe_iters = 100;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--iters=") && !absl::SimpleAtoi(arg, &iters)) return 2;
    if (absl::ConsumePrefix(&arg, "--moe_iters=") && !absl::SimpleAtoi(arg, &moe_iters)) return 2;
  }
  std::printf(
      "comm_bench: %d iterations per all-reduce series, %d per all-to-all-v; "
      "%u hardware threads\n",
      iters, moe_iters, std::thread::hardware_concurrency());
  for (int world : {2, 4}) {
    RunInProcess(world, iters * 5, moe_iters);
    std::fflush(stdout);
    auto exits = testing::RunRankProcesses(
        "gloo", world,
        {testing::MakeTempDir("comm_bench"), absl::StrCat(iters), absl::StrCat(moe_iters)},
        absl::Minutes(5));
    Check(exits.status(), "gloo rank processes");
    for (const testing::RankExit& exit : *exits) {
      if (!exit.exited || exit.exit_code != 0) {
        std::fprintf(stderr, "a gloo rank failed: %s\n", testing::DescribeExit(exit).c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::comm

int main(int argc, char** argv) { return lockstep::comm::Main(argc, argv); }
