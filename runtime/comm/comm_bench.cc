// comm_bench: latency of a small all-reduce (the executor's step vote) and throughput
// of a MoE-sized all-to-all-v, for InProcessCommunicator (threads) and
// GlooCommunicator (one process per rank over loopback TCP), next to the raw gloo
// calls (gloo::AllreduceOptions / AlltoallvOptions used directly) in the same
// processes and the same run; then the step's collectives (the 4-int64 vote, the
// 200-byte intake broadcast and response gather, the 2 MiB-per-rank all-to-all-v) over
// ShmCommunicator against GlooCommunicator, paired call by call in the same processes,
// with the in-process figures of the same run in the summary.
//
//   bazel run -c opt //runtime/comm:comm_bench [-- --iters=3000 --moe_iters=100
//       --shm_chunk_kib=256 --shm_spin_us=50 --shm_direct=1 --compare_only --worlds=2,4]
//
// Rank processes re-execute this binary (testing/rank_processes.h); rank 0 prints.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/context.h"
#include "gloo/math.h"
#include "gloo/rendezvous/file_store.h"
#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/shm_segment.h"
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

// The step's collectives compared across transports (keys of the summary).
constexpr const char* kCompareOps[] = {"vote", "broadcast", "gather", "alltoallv"};
constexpr int64_t kVoteElements = 4;
constexpr size_t kSmallPayload = 200;

// Median microseconds per op key, in-process (threads) then gloo and shm (processes).
using Medians = std::map<std::string, double>;

// ---- In-process: ranks as threads of this process.

// Runs fn(comm, rank) `iters` times on every rank (one thread each) of a fresh group;
// returns rank 0's times.
std::vector<double> InProcessSeries(int world, int iters,
                                    const std::function<void(Communicator&, int)>& fn) {
  auto group = MakeInProcessGroup(world);
  std::vector<double> rank0_us;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < iters; ++i) {
        const double us = TimeUs([&] { fn(*group[r], r); });
        if (r == 0) rank0_us.push_back(us);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return rank0_us;
}

Medians RunInProcess(int world, int iters, int moe_iters) {
  Medians medians;
  for (int64_t n : {int64_t{1}, kVoteElements, int64_t{8}}) {
    const Stats s = Summarize(InProcessSeries(world, iters, [n](Communicator& comm, int r) {
      std::vector<int64_t> vote(n, r);
      Check(comm.AllReduce(absl::MakeSpan(vote), ReduceOp::kMax, Tag("vote")),
            "in-process AllReduce");
    }));
    PrintRow("in-process allreduce", world, n, s);
    if (n == kVoteElements) medians["vote"] = s.median_us;
  }
  const std::string payload(kSmallPayload, 'x');
  medians["broadcast"] = Summarize(InProcessSeries(world, iters, [&](Communicator& comm, int r) {
                           std::string intake = r == 0 ? payload : "";
                           Check(comm.Broadcast(&intake, 0, Tag("intake")), "in-process Broadcast");
                         })).median_us;
  medians["gather"] =
      Summarize(InProcessSeries(world, iters, [&](Communicator& comm, int) {
        Check(comm.Gather(payload, 0, Tag("responses")).status(), "in-process Gather");
      })).median_us;
  const Stats s = Summarize(InProcessSeries(world, moe_iters, [world](Communicator& comm, int r) {
    static thread_local std::vector<float> send;
    static thread_local std::vector<float> recv;
    const std::vector<int64_t> send_counts = MoeCounts(r, world);
    const std::vector<int64_t> recv_counts = MoeRecvCounts(r, world);
    send.assign(kMoeTokens * kMoeHidden, 1.0f);
    recv.resize(std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0}));
    Check(comm.AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, Tag("moe")),
          "in-process AllToAllV");
  }));
  medians["alltoallv"] = s.median_us;
  std::printf("%-24s ranks=%d %lld tokens x %lld floats: median=%8.1f us  %6.2f GB/s per rank\n",
              "in-process alltoallv", world, static_cast<long long>(kMoeTokens),
              static_cast<long long>(kMoeHidden), s.median_us,
              MoeBytesPerRank(0, world) / (s.median_us * 1e3));
  return medians;
}

// ---- Shm against gloo, paired call by call in the same rank processes.

// Runs gloo_fn and shm_fn in alternating blocks of `block` calls (which goes first
// alternates too) after a warm-up, so that each call is measured in a steady run of
// its own transport while the machine's load hits both alike. On rank 0 prints both
// and appends "<key> <gloo median> <shm median> <median of the per-block-pair ratios
// of medians>" to `results`.
void ComparePaired(absl::string_view key, int rank, int world, int iters, int block,
                   const std::function<void()>& gloo_fn, const std::function<void()>& shm_fn,
                   std::ofstream& results) {
  for (int i = 0; i < std::min(iters, 2 * block); ++i) {
    gloo_fn();
    shm_fn();
  }
  std::vector<double> gloo_us;
  std::vector<double> shm_us;
  std::vector<double> ratios;
  for (int b = 0; b * block < iters; ++b) {
    std::vector<double> g;
    std::vector<double> s;
    for (int k = 0; k < 2; ++k) {
      const bool gloo_turn = (b + k) % 2 == 0;
      for (int i = 0; i < block; ++i) {
        (gloo_turn ? g : s).push_back(TimeUs(gloo_turn ? gloo_fn : shm_fn));
      }
    }
    ratios.push_back(Summarize(g).median_us / Summarize(s).median_us);
    gloo_us.insert(gloo_us.end(), g.begin(), g.end());
    shm_us.insert(shm_us.end(), s.begin(), s.end());
  }
  if (rank != 0) return;
  const Stats g = Summarize(gloo_us);
  const Stats s = Summarize(shm_us);
  PrintRow(absl::StrCat("gloo ", key), world, 0, g);
  PrintRow(absl::StrCat("shm ", key), world, 0, s);
  results << key << " " << g.median_us << " " << s.median_us << " " << Summarize(ratios).median_us
          << "\n";
}

void CompareShmAndGloo(int rank, int world, int iters, int moe_iters, Communicator& gloo,
                       Communicator& shm, const std::string& results_path) {
  std::ofstream results;
  if (rank == 0) results.open(results_path);
  std::vector<int64_t> vote(kVoteElements, rank);
  auto vote_on = [&](Communicator& comm) {
    return
        [&] { Check(comm.AllReduce(absl::MakeSpan(vote), ReduceOp::kMax, Tag("vote")), "vote"); };
  };
  ComparePaired("vote", rank, world, iters, 100, vote_on(gloo), vote_on(shm), results);
  const std::string payload(kSmallPayload, 'x');
  auto broadcast_on = [&](Communicator& comm) {
    return [&] {
      std::string intake = rank == 0 ? payload : "";
      Check(comm.Broadcast(&intake, 0, Tag("intake")), "Broadcast");
    };
  };
  ComparePaired("broadcast", rank, world, iters, 100, broadcast_on(gloo), broadcast_on(shm),
                results);
  auto gather_on = [&](Communicator& comm) {
    return [&] { Check(comm.Gather(payload, 0, Tag("responses")).status(), "Gather"); };
  };
  ComparePaired("gather", rank, world, iters, 100, gather_on(gloo), gather_on(shm), results);
  const std::vector<int64_t> send_counts = MoeCounts(rank, world);
  const std::vector<int64_t> recv_counts = MoeRecvCounts(rank, world);
  std::vector<float> send(kMoeTokens * kMoeHidden, 1.0f);
  std::vector<float> recv(std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0}));
  auto a2av_on = [&](Communicator& comm) {
    return [&] {
      Check(comm.AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, Tag("moe")),
            "AllToAllV");
    };
  };
  ComparePaired("alltoallv", rank, world, moe_iters, 10, a2av_on(gloo), a2av_on(shm), results);
}

// ---- Gloo against raw gloo: this process is one rank.

void RunGlooSections(int rank, int world, int iters, int moe_iters,
                     std::unique_ptr<GlooCommunicator>* comm) {
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

// One rank process. args: gloo store directory (also holds rank 0's results), iterations,
// all-to-all-v iterations, shm segment name, shm chunk bytes, compare only (0 or 1),
// shm spin microseconds, shm direct reads (0 or 1).
void RunRank(const testing::RankProcessRole& role) {
  const int rank = role.rank;
  const int world = role.world_size;
  int iters = 0;
  int moe_iters = 0;
  int64_t chunk = 0;
  int compare_only = 0;
  int spin_us = 0;
  int direct = 1;
  if (role.args.size() < 8 || !absl::SimpleAtoi(role.args[6], &spin_us) ||
      !absl::SimpleAtoi(role.args[7], &direct) || !absl::SimpleAtoi(role.args[1], &iters) ||
      !absl::SimpleAtoi(role.args[2], &moe_iters) || !absl::SimpleAtoi(role.args[4], &chunk) ||
      !absl::SimpleAtoi(role.args[5], &compare_only)) {
    std::exit(2);
  }
  gloo::rendezvous::FileStore store(role.args[0]);
  GlooOptions options;
  options.rank = rank;
  options.world_size = world;
  options.store = &store;
  options.prefix = "bench";
  auto gloo = GlooCommunicator::Create(options);
  Check(gloo.status(), "GlooCommunicator::Create");
  ShmOptions shm_options;
  shm_options.name = role.args[3];
  shm_options.rank = rank;
  shm_options.world_size = world;
  shm_options.chunk_bytes = chunk;
  shm_options.spin = absl::Microseconds(spin_us);
  shm_options.direct_copy = direct != 0;
  auto shm = ShmCommunicator::Create(shm_options);
  Check(shm.status(), "ShmCommunicator::Create");
  if (!compare_only) RunGlooSections(rank, world, iters, moe_iters, &*gloo);
  CompareShmAndGloo(rank, world, iters, moe_iters, **gloo, **shm,
                    absl::StrCat(role.args[0], "/compare.txt"));
  std::fflush(stdout);
}

// The summary of one world size: in-process, gloo and shm medians of the same run.
void PrintSummary(int world, const Medians& in_process, const std::string& results_path) {
  std::ifstream results(results_path);
  std::map<std::string, std::vector<double>> rows;  // gloo, shm, paired ratio
  std::string key;
  double gloo_us = 0, shm_us = 0, ratio = 0;
  while (results >> key >> gloo_us >> shm_us >> ratio) rows[key] = {gloo_us, shm_us, ratio};
  std::printf("summary ranks=%d, median us: %-12s %10s %10s %10s %9s %9s %11s\n", world, "op",
              "in-process", "gloo", "shm", "gloo/shm", "paired", "shm/in-proc");
  for (const char* op : kCompareOps) {
    auto it = rows.find(op);
    if (it == rows.end()) continue;
    const std::vector<double>& r = it->second;
    const double ip = in_process.count(op) ? in_process.at(op) : 0;
    std::printf("summary ranks=%d, median us: %-12s %10.1f %10.1f %10.1f %8.1fx %8.1fx %10.2fx\n",
                world, op, ip, r[0], r[1], r[0] / r[1], r[2], r[1] / ip);
  }
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  if (std::optional<testing::RankProcessRole> role = testing::GetRankProcessRole()) {
    RunRank(*role);
    return 0;
  }
  int iters = 3000;
  int moe_iters = 100;
  int64_t chunk_kib = ShmOptions().chunk_bytes >> 10;
  int spin_us = absl::ToInt64Microseconds(ShmOptions().spin);
  bool compare_only = false;
  int direct = 1;
  std::vector<int> worlds = {2, 4};
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--worlds=")) {
      worlds.clear();
      for (absl::string_view w : absl::StrSplit(arg, ',')) {
        int world = 0;
        if (!absl::SimpleAtoi(w, &world) || world < 1) return 2;
        worlds.push_back(world);
      }
    }
    if (absl::ConsumePrefix(&arg, "--iters=") && !absl::SimpleAtoi(arg, &iters)) return 2;
    if (absl::ConsumePrefix(&arg, "--moe_iters=") && !absl::SimpleAtoi(arg, &moe_iters)) return 2;
    if (absl::ConsumePrefix(&arg, "--shm_chunk_kib=") && !absl::SimpleAtoi(arg, &chunk_kib)) {
      return 2;
    }
    if (absl::ConsumePrefix(&arg, "--shm_spin_us=") && !absl::SimpleAtoi(arg, &spin_us)) return 2;
    if (absl::ConsumePrefix(&arg, "--shm_direct=") && !absl::SimpleAtoi(arg, &direct)) return 2;
    if (arg == "--compare_only") compare_only = true;
  }
  std::printf(
      "comm_bench: %d iterations per small-op series, %d per all-to-all-v; shm chunk %lld KiB, "
      "spin %d us, direct reads %s; %u hardware threads\n",
      iters, moe_iters, static_cast<long long>(chunk_kib), spin_us, direct ? "on" : "off",
      std::thread::hardware_concurrency());
  for (int world : worlds) {
    const Medians in_process = RunInProcess(world, iters * 5, moe_iters);
    std::fflush(stdout);
    const std::string dir = testing::MakeTempDir("comm_bench");
    const std::string shm_name = ShmSegmentName(
        "comm_bench", absl::StrCat(absl::Hex(std::random_device()()), "w", world), "bench");
    auto exits =
        testing::RunRankProcesses("ranks", world,
                                  {dir, absl::StrCat(iters), absl::StrCat(moe_iters), shm_name,
                                   absl::StrCat(chunk_kib * 1024), compare_only ? "1" : "0",
                                   absl::StrCat(spin_us), absl::StrCat(direct)},
                                  absl::Minutes(8));
    Check(exits.status(), "rank processes");
    for (const testing::RankExit& exit : *exits) {
      if (!exit.exited || exit.exit_code != 0) {
        std::fprintf(stderr, "a rank failed: %s\n", testing::DescribeExit(exit).c_str());
        return 1;
      }
    }
    PrintSummary(world, in_process, absl::StrCat(dir, "/compare.txt"));
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::comm

int main(int argc, char** argv) { return lockstep::comm::Main(argc, argv); }
