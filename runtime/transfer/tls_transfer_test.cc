// KV transfers between a context rank and a generation rank whose cluster has TLS files
// (certificates made at test time), on each transport: over the TCP data plane the
// blocks move bit-exact inside TLS; a generation rank that trusts another CA cannot
// pull (the context rank's certificate does not check) and gets an error, not blocks.
#include <memory>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/testing/test_certs.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/testing/transfer_fixture.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using testing::AwaitEvents;
using testing::CompareMovedBlocks;
using testing::RandomBlocks;
using testing::TestBlocks;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr absl::Duration kWait = absl::Seconds(20);

class TlsTransferTest : public testing::TransportTest {
 protected:
  void SetUp() override {
    TransportTest::SetUp();
    absl::StatusOr<security::TestCerts> certs = security::MakeTestCerts(::testing::TempDir());
    ASSERT_THAT(certs, IsOk());
    certs_ = *certs;
    cluster_ = std::make_unique<security::ScopedClusterSecurity>(certs_.Security("tls-token"));
  }

  SendSpec Send(const TestBlocks& blocks) {
    return SendSpec{blocks, blocks.num_tokens, clock_.Now() + absl::Minutes(1)};
  }

  security::TestCerts certs_;
  std::unique_ptr<security::ScopedClusterSecurity> cluster_;
};

TEST_P(TlsTransferTest, MovesBlocksBitExactOverTls) {
  SCOPED_TRACE(SeedTrace(seed_));
  KvDescriptor d = testing::SmallDescriptor();
  d.target->head_dim = 64;  // 32 KiB target blocks: many TLS records per chunk
  d.target->tokens_per_block = 16;
  auto ctx = Rank({.name = "ctx0 rank 0", .descriptor = d, .chunk_bytes = 64 << 10}, seed_ + 1);
  auto gen = Rank({.name = "gen0 rank 0", .descriptor = d, .chunk_bytes = 64 << 10}, 0);
  ASSERT_TRUE(ctx && gen);
  for (int request = 0; request < 3; ++request) {
    const TestBlocks sent =
        RandomBlocks(RequestId(10 + request), 150, d, /*draft=*/true, 64, 0, rng_);
    const TestBlocks received =
        RandomBlocks(RequestId(40 + request), 150, d, /*draft=*/true, 64, 1, rng_);
    ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
    ASSERT_THAT((*gen)->StartReceive(Receive(received, (*ctx)->address(), sent.id, kWait)),
                IsOk());
    const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_THAT(got[0].status, IsOk());
    ASSERT_EQ(AwaitEvents(*ctx, 1, kWait).size(), 1u);
    EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d), IsEmpty());
  }
  // The transport the parameter names carried them (one data-plane connection, reused).
  EXPECT_EQ((*ctx)->data_plane_address().empty(), !GetParam());
  EXPECT_EQ((*gen)->pulls_over_tcp(), GetParam() ? 3 : 0);
  EXPECT_EQ((*gen)->pulls_over_grpc(), GetParam() ? 0 : 3);
}

TEST_P(TlsTransferTest, ARankThatTrustsAnotherCaCannotPull) {
  SCOPED_TRACE(SeedTrace(seed_));
  const KvDescriptor d = testing::SmallDescriptor();
  auto ctx = Rank({.name = "ctx0 rank 0", .descriptor = d}, seed_ + 1);
  ASSERT_TRUE(ctx);
  // The generation rank belongs to another cluster: its CA did not sign ctx's certificate.
  absl::StatusOr<security::ClusterSecurity> stranger = security::LoadClusterSecurity(
      {.tls_cert_file = certs_.other_cert_file, .tls_key_file = certs_.other_key_file,
       .tls_ca_file = certs_.other_ca_file});
  ASSERT_THAT(stranger, IsOk());
  stranger->cluster_token = "tls-token";
  security::ScopedClusterSecurity scoped(*stranger);
  auto gen = Rank({.name = "gen0 rank 0", .descriptor = d}, 0);
  ASSERT_TRUE(gen);
  const TestBlocks sent = RandomBlocks(RequestId(7), 23, d, /*draft=*/true, 64, 0, rng_);
  const TestBlocks received = RandomBlocks(RequestId(40), 23, d, /*draft=*/true, 64, 0, rng_);
  ASSERT_THAT((*ctx)->StartSend(Send(sent)), IsOk());
  ASSERT_THAT((*gen)->StartReceive(Receive(received, (*ctx)->address(), sent.id, kWait)), IsOk());
  const std::vector<TransferEvent> got = AwaitEvents(*gen, 1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].status.message(), HasSubstr("certificate verify failed"));
  EXPECT_THAT(CompareMovedBlocks(*ctx, sent, *gen, received, d), Not(IsEmpty()));
}

INSTANTIATE_TEST_SUITE_P(Transports, TlsTransferTest, ::testing::Bool(), testing::TransportName);

}  // namespace
}  // namespace lockstep::transfer
