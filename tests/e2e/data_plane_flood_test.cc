// Disaggregated serving (context DEP2, generation DEP1) as real processes while each
// context rank's TCP data plane holds 72 idle connections and 8 slow-drip ones (15 of a
// prefix's 16 bytes, never the last): every request completes, no KV transfer fails
// and none migrates (runtime/transfer/tcp_data_server.h: idle connections are evicted
// from the handshake; a refused puller pulls over gRPC).
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/launcher/local_deployment.h"
#include "runtime/transfer/tcp_wire.h"
#include "tests/e2e/e2e_util.h"

namespace lockstep::e2e {
namespace {

constexpr absl::Duration kWait = absl::Seconds(60);

// The address in `rank`'s "data plane at HOST:PORT" log line; "" when none.
std::string DataPlaneAddress(const launcher::LocalDeployment& d, const std::string& rank) {
  const std::string log = d.LogOf(rank);
  const std::string marker = "data plane at ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  return log.substr(begin, log.find_first_of(" \n", begin) - begin);
}

std::vector<int32_t> Prompt(int i) {
  std::vector<int32_t> p;
  for (int c = 0; c < 20 + i % 30; ++c) p.push_back(33 + (i * 11 + c) % 90);
  return p;
}

TEST(DataPlaneFloodTest, IdleAndSlowDripConnectionsFailNoDisaggregatedRequest) {
  const std::string model = TestTmpDir() + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
      launcher::LocalDeployment::Start(
          DisaggYaml(model,
                     DisaggOptions{.comm = std::string(kE2eComm), .generation = {{"gen0", 1}}}),
          TestTmpDir() + "/run", LockstepBinary(), absl::Seconds(180));
  ASSERT_TRUE(started.ok()) << started.status();
  launcher::LocalDeployment& d = **started;

  std::vector<transfer::TcpSocket> held;
  for (const char* rank : {"ctx0/rank0", "ctx0/rank1"}) {
    const std::string address = DataPlaneAddress(d, rank);
    ASSERT_FALSE(address.empty()) << d.LogOf(rank);
    for (int i = 0; i < 80; ++i) {
      absl::StatusOr<transfer::TcpSocket> socket =
          transfer::ConnectTcp(address, absl::Now() + kWait);
      ASSERT_TRUE(socket.ok()) << rank << ": " << socket.status();
      if (i >= 72) {  // slow drip: most of a prefix, never all of it
        const transfer::RequestPrefix prefix;
        ASSERT_TRUE(
            transfer::SendAll(*socket, &prefix, sizeof(prefix) - 1, absl::Now() + kWait, nullptr)
                .ok());
      }
      held.push_back(*std::move(socket));
    }
  }

  constexpr int kClients = 4;
  constexpr int kPerClient = 4;
  std::vector<launcher::GrpcResult> results(kClients * kPerClient);
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      for (int i = t; i < kClients * kPerClient; i += kClients) {
        results[i] = d.Generate(Prompt(i), 6, static_cast<uint64_t>(i), kWait);
      }
    });
  }
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].error_code, 0) << "request " << i << ": " << results[i].error_message;
  }
  absl::StatusOr<v1::StatsResponse> gen = InstanceStats(d, "gen0");
  ASSERT_TRUE(gen.ok()) << gen.status();
  EXPECT_EQ(gen->transfer_failures(), 0);
  EXPECT_EQ(RouterMetric(d, "lockstep_router_migrations_total"), 0) << LogTails(d);
}

}  // namespace
}  // namespace lockstep::e2e
