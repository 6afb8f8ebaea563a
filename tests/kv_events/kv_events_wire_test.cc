// KV events over the control plane's messages: leaders' publishers (runtime/worker) and
// the router's KvRouting, exchanging ReportKvEvents requests and responses (serialized
// and parsed, as gRPC carries them) under random tree changes, lost reports, lost
// answers, instance restarts (with and without a new registration) and router
// restarts. Whenever every rank has reported since the last disturbance and the
// exchange has settled, the router holds exactly every rank's keys.
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "kvcache/kv_events.h"
#include "proto/router.pb.h"
#include "runtime/router/routing/kv_routing.h"
#include "runtime/worker/kv_event_publisher.h"

namespace lockstep {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kRanks = 2;

struct Instance {
  std::string name;
  uint64_t incarnation = 0;
  std::unique_ptr<worker::KvEventPublisher> publisher;
  std::vector<std::set<uint64_t>> keys;  // each rank's tree
};

void Restart(Instance& instance) {
  ++instance.incarnation;
  instance.publisher = std::make_unique<worker::KvEventPublisher>(worker::KvEventPublisher::Options{
      .instance = instance.name,
      .world_size = kRanks,
      .incarnation = instance.incarnation,
      .hash_salt = 3,
      .tokens_per_block = 16,
      .max_pending_keys = 24});  // small: overflows turn into snapshots now and then
  instance.keys.assign(kRanks, {});
}

template <typename T>
T Reparse(const T& message) {
  T out;
  EXPECT_TRUE(out.ParseFromString(message.SerializeAsString()));
  return out;
}

TEST(KvEventsWireTest, TheRouterConvergesOnEveryRanksKeys) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const auto chance = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };
  auto router = std::make_unique<router::KvRouting>(router::KvRouting::Options{});
  int snapshots = 0;  // sent: gaps, restarts, lost reports and overflows all end in one
  std::vector<Instance> instances(2);
  for (size_t i = 0; i < instances.size(); ++i) {
    instances[i].name = "inst" + std::to_string(i);
    instances[i].incarnation = 100 * (i + 1);
    Restart(instances[i]);
  }
  // One step of one instance: random tree changes on its ranks, as the gather delivers.
  const auto step = [&](Instance& inst, bool every_rank) {
    std::vector<kv::KvEventDelta> deltas(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      kv::KvEventLog log;
      std::set<uint64_t>& keys = inst.keys[r];
      for (int n = static_cast<int>(rng() % 4) + (every_rank ? 1 : 0); n > 0; --n) {
        const uint64_t key = 1 + rng() % 40;
        if (keys.insert(key).second) {
          log.OnCommitted(key);
        } else if (chance(0.5)) {
          keys.erase(key);
          log.OnEvicted(key);
        }
      }
      deltas[r] = log.Take();
      while (every_rank && deltas[r].empty()) {  // make sure this rank reports
        const uint64_t key = 1000 + rng() % 1000;
        if (keys.insert(key).second) deltas[r].committed.push_back(key);
      }
    }
    inst.publisher->OnKvEvents(deltas);
  };
  // One report of one instance, delivered, lost, or applied with its answer lost.
  const auto send = [&](Instance& inst, bool reliable) {
    std::optional<v1::ReportKvEventsRequest> report = inst.publisher->TakeReport();
    if (!report.has_value()) return;
    snapshots += report->snapshots_size();
    const double fate = reliable ? 1 : std::uniform_real_distribution<>(0, 1)(rng);
    if (fate < 0.05) {
      inst.publisher->OnSendFailed(*report);  // never reached the router
      return;
    }
    absl::StatusOr<v1::ReportKvEventsResponse> answer = router->Apply(Reparse(*report));
    ASSERT_TRUE(answer.ok()) << answer.status();
    if (fate < 0.1) {
      inst.publisher->OnSendFailed(*report);  // applied, but the answer was lost
      return;
    }
    inst.publisher->OnResponse(Reparse(*answer));
  };
  int checks = 0;
  for (int round = 0; round < 3000; ++round) {
    Instance& inst = instances[rng() % instances.size()];
    if (chance(0.005)) {
      Restart(inst);
      if (chance(0.5)) router->RemoveInstance(inst.name);  // it registered again
    } else if (chance(0.002)) {
      router = std::make_unique<router::KvRouting>(router::KvRouting::Options{});
    } else {
      step(inst, /*every_rank=*/false);
      if (chance(0.6)) send(inst, /*reliable=*/false);
    }
    if (round % 100 != 99) continue;
    // Settle: every rank reports something, then reports flow until nothing is left.
    for (Instance& i : instances) {
      step(i, /*every_rank=*/true);
      for (int k = 0; k < 4; ++k) send(i, /*reliable=*/true);
      ASSERT_FALSE(i.publisher->TakeReport().has_value()) << "round " << round;
    }
    for (const Instance& i : instances) {
      for (int r = 0; r < kRanks; ++r) {
        ASSERT_EQ(router->KeysOf(i.name, r),
                  std::vector<uint64_t>(i.keys[r].begin(), i.keys[r].end()))
            << "round " << round << " " << i.name << "/" << r;
      }
    }
    ++checks;
  }
  EXPECT_EQ(checks, 30);
  EXPECT_GT(snapshots, 10);
}

}  // namespace
}  // namespace lockstep
