// Test scaffolding for the gRPC transceiver: ranks with their own KV pools (a KvManager
// on host memory, or on fake device memory that only the pools' copiers reach; filled
// with seeded random bytes or a sentinel), block tables with distinct ids, and bounded
// waits for transfer events. The helpers read the pools through their copiers. Testonly.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_TESTING_TRANSFER_FIXTURE_H_
#define LOCKSTEP_RUNTIME_TRANSFER_TESTING_TRANSFER_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_copier.h"
#include "kvcache/kv_manager.h"
#include "kvcache/testing/fake_device_allocator.h"
#include "runtime/transfer/grpc_transceiver.h"

namespace lockstep::transfer::testing {

// A small tiny-moe-like shape: 1 KiB target blocks, 512 B draft blocks, 4 tokens each.
KvDescriptor SmallDescriptor();

// One rank: its pools and its transceiver (destroyed in the reverse order).
struct TestRank {
  std::unique_ptr<kv::BlockAllocator> allocator;
  // Set when the pools are fake device memory: counts the copiers' calls.
  kv::testing::FakeDeviceAllocator* device = nullptr;
  std::unique_ptr<kv::KvManager> kv;
  std::unique_ptr<GrpcTransceiver> transceiver;

  GrpcTransceiver* operator->() { return transceiver.get(); }
  kv::BlockCopier& copier(kv::PoolKind kind) const { return *kv->Copier(kind); }
};

struct RankConfig {
  std::string name = "rank";
  KvDescriptor descriptor = SmallDescriptor();
  int32_t num_blocks = 64;  // per pool
  size_t chunk_bytes = 4 << 10;
  int max_concurrent_pulls = 8;
  int max_concurrent_receives = 4;
  TransferHooks hooks;
  // Serve and pull over the TCP data plane (else gRPC only).
  bool tcp_data_plane = true;
  // The data plane's connection bounds and handshake deadline.
  TcpDataServerOptions data_plane;
  // Serve and pull over a UCX data plane too (ucx_worker.h), with these bounds and hooks.
  bool ucx = false;
  UcxDataServerOptions ucx_server;
  UcxWorkerHooks ucx_hooks;
  // The pools in fake device memory (kvcache/testing/fake_device_allocator.h), else host.
  bool device_memory = false;
  // When set, the pools live in what this allocator hands out (a real device allocator in
  // the GPU checks); it takes precedence over `device_memory`.
  std::function<std::unique_ptr<kv::BlockAllocator>()> make_allocator;
};

// The pools are filled from `seed` (0: a constant sentinel).
absl::StatusOr<std::unique_ptr<TestRank>> MakeRank(const RankConfig& config, Clock* clock,
                                                   uint64_t seed);

// `count` distinct block ids in [0, num_blocks), in random order.
std::vector<BlockId> RandomTable(int count, int32_t num_blocks, std::mt19937_64& rng);

// A request's blocks with the number of tokens that move: what a SendSpec or a
// ReceiveSpec carries.
struct TestBlocks : kv::BlockRefs {
  int64_t num_tokens = 0;
};

// Blocks of request `id` with `num_tokens` tokens: random target (and, with `draft`,
// draft) tables, `extra` blocks longer than needed.
TestBlocks RandomBlocks(RequestId id, int64_t num_tokens, const KvDescriptor& descriptor,
                        bool draft, int32_t num_blocks, int extra, std::mt19937_64& rng);

// Polls `rank` until `count` events have come or `timeout` passed (bounded waits on
// WaitForEvent between polls). Returns what came.
std::vector<TransferEvent> AwaitEvents(TestRank& rank, size_t count, absl::Duration timeout);

// The differences between the moved blocks of `from` (in `from_rank`) and of `to` (in
// `to_rank`), one line each; empty when bit-exact.
std::vector<std::string> CompareMovedBlocks(const TestRank& from_rank, const TestBlocks& from,
                                            const TestRank& to_rank, const TestBlocks& to,
                                            const KvDescriptor& descriptor);

// Blocks of `rank` not in `used` (per pool) that differ from the sentinel fill.
std::vector<std::string> TouchedOutside(const TestRank& rank, const std::vector<TestBlocks>& used,
                                        const KvDescriptor& descriptor);

// Base of the transceiver tests, parameterized by transport: the TCP data plane (true)
// or gRPC only. Seeded randomness (the seed from TestSeed) and a fake clock.
class TransportTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override;

  // A rank on the parameter's transport; null (and a failure) if it cannot start.
  std::unique_ptr<TestRank> Rank(RankConfig config, uint64_t fill_seed);

  // A receive of `blocks` from request `remote_id` of the rank serving at `address`.
  ReceiveSpec Receive(TestBlocks blocks, const std::string& address, RequestId remote_id,
                      absl::Duration timeout);
  // The same from the rank `from`.
  ReceiveSpec Receive(TestBlocks blocks, const TestRank& from, RequestId remote_id,
                      absl::Duration timeout = absl::Seconds(20)) {
    return Receive(std::move(blocks), from.transceiver->address(), remote_id, timeout);
  }
  // A send of all of `blocks`, its lease ending `lease` from now (the fake clock).
  SendSpec Send(const TestBlocks& blocks, absl::Duration lease = absl::Minutes(1)) {
    return SendSpec{blocks, blocks.num_tokens, clock_.Now() + lease};
  }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  FakeClock clock_;
};

// Names the parameter in test names.
std::string TransportName(const ::testing::TestParamInfo<bool>& info);

}  // namespace lockstep::transfer::testing

#endif  // LOCKSTEP_RUNTIME_TRANSFER_TESTING_TRANSFER_FIXTURE_H_
