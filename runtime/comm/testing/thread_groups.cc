#include "runtime/comm/testing/thread_groups.h"

#include <atomic>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/file_store.h"
#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/shm_segment.h"
#include "runtime/comm/testing/fake_primitives.h"
#include "runtime/comm/testing/rank_processes.h"

namespace lockstep::comm::testing {
namespace {

// Runs make(r) on one thread per rank (each blocks until every rank joined).
absl::StatusOr<ThreadGroup> JoinOnThreads(
    int world, const std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int)>& make) {
  ThreadGroup group(world);
  std::vector<absl::Status> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto comm = make(r);
      if (comm.ok()) {
        group[r] = *std::move(comm);
      } else {
        errors[r] = comm.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& error : errors) {
    if (!error.ok()) return error;
  }
  return group;
}

}  // namespace

std::string TransportName(Transport transport) {
  switch (transport) {
    case Transport::kInProcess:
      return "in_process";
    case Transport::kGloo:
      return "gloo";
    case Transport::kShm:
      return "shm";
    case Transport::kNcclFake:
      return "nccl_fake";
  }
  return "unknown";
}

TransportTraits TraitsOf(Transport transport) {
  TransportTraits traits;
  switch (transport) {
    case Transport::kInProcess:
    case Transport::kShm:
      traits.late_rank_sees_broken_peers = true;
      break;
    case Transport::kGloo:
      traits.detects_other_op = false;
      traits.names_the_failed_peer = false;
      break;
    case Transport::kNcclFake:
      break;
  }
  return traits;
}

std::string FreshShmName(absl::string_view what) {
  // A random token (like an instance's epoch; not the pid, which repeats across the
  // PID namespaces of parallel sandboxed runs that share /dev/shm) and a counter.
  static const std::string token =
      absl::StrCat(absl::Hex((uint64_t{std::random_device()()} << 32) ^ std::random_device()()));
  static std::atomic<int> counter{0};
  return ShmSegmentName("shmtest", absl::StrCat(token, "x", counter++), what);
}

absl::StatusOr<ThreadGroup> MakeThreadGroup(Transport transport, int world) {
  switch (transport) {
    case Transport::kInProcess:
      return MakeInProcessGroup(world);
    case Transport::kNcclFake: {
      ThreadGroup group;
      for (auto& primitives : MakeFakePrimitivesGroup(world)) {
        group.push_back(std::make_unique<NcclCommunicator>(std::move(primitives)));
      }
      return group;
    }
    case Transport::kShm: {
      ShmOptions options;
      options.connect_timeout = absl::Seconds(20);
      return MakeShmThreadGroup(world, options);
    }
    case Transport::kGloo: {
      static std::atomic<int> counter{0};
      const std::string dir = MakeTempDir("gloo_threads");
      const std::string prefix = absl::StrCat("threads", counter++);
      return JoinOnThreads(world, [&](int r) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        // A store per rank over one directory: gloo's FileStore is not thread-safe (its
        // set() appends to a member vector; ranks sharing one crashed 1 run in ~30).
        gloo::rendezvous::FileStore store(dir);
        GlooOptions options;
        options.rank = r;
        options.world_size = world;
        options.store = &store;
        options.prefix = prefix;
        options.connect_timeout = absl::Seconds(20);
        return GlooCommunicator::Create(options);
      });
    }
  }
  return absl::InvalidArgumentError("unknown transport");
}

absl::StatusOr<ThreadGroup> MakeShmThreadGroup(int world, ShmOptions options) {
  if (options.name.empty()) options.name = FreshShmName("threads");
  return JoinOnThreads(world, [&](int r) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    ShmOptions mine = options;
    mine.rank = r;
    mine.world_size = world;
    return ShmCommunicator::Create(mine);
  });
}

std::vector<absl::Status> RunRanks(ThreadGroup& group, const std::vector<RankFn>& fns) {
  std::vector<absl::Status> results(group.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = fns[r](*group[r]); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

std::vector<absl::Status> RunAll(ThreadGroup& group, const RankFn& fn) {
  return RunRanks(group, std::vector<RankFn>(group.size(), fn));
}

}  // namespace lockstep::comm::testing
