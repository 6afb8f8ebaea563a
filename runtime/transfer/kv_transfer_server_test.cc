// KvTransferServer against the generated client stub of proto/kv_transfer.proto: the
// raw, zero-copy stream is an ordinary lockstep.v1.BlockChunk stream on the wire.
#include "runtime/transfer/kv_transfer_server.h"

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status_macros.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_transfer.grpc.pb.h"
#include "runtime/transfer/crc32c.h"
#include "runtime/transfer/tcp_wire.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::HasSubstr;

constexpr int32_t kBlocks = 16;

class KvTransferServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = TestSeed();
    std::mt19937_64 rng(seed_);
    descriptor_.model = "m";
    descriptor_.target = kv::BlockLayout{
        .num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .tokens_per_block = 16};  // 1 KiB blocks
    slab_.resize(kBlocks * descriptor_.target->BlockFloats());
    for (float& f : slab_) f = static_cast<float>(rng() % 1000) / 7.0f;
    KvTransferServerOptions options;
    options.chunk_bytes = 4 << 10;
    absl::StatusOr<std::unique_ptr<KvTransferServer>> server = KvTransferServer::Start(
        options, descriptor_, KvSlabs{{slab_.data(), kBlocks}, {}}, claims_);
    ASSERT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
    stub_ = lockstep::v1::KvTransferService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }

  lockstep::v1::PullRequest Request(int64_t id, int64_t num_tokens, int32_t blocks) {
    lockstep::v1::PullRequest request;
    request.set_context_request_id(id);
    request.set_requester("test");
    ToProto(descriptor_, request.mutable_kv());
    request.set_num_tokens(num_tokens);
    request.set_target_blocks(blocks);
    return request;
  }

  uint64_t seed_ = 0;
  FakeClock clock_;
  KvDescriptor descriptor_;
  std::vector<float> slab_;
  std::shared_ptr<EventQueue> events_ = std::make_shared<EventQueue>();
  std::shared_ptr<SendClaims> claims_ = SendClaims::Create(&clock_, events_);
  std::unique_ptr<KvTransferServer> server_;
  std::unique_ptr<lockstep::v1::KvTransferService::Stub> stub_;
};

TEST_F(KvTransferServerTest, GeneratedClientReadsTheStream) {
  SCOPED_TRACE(SeedTrace(seed_));
  // 83 tokens: 6 blocks of 16 tokens, the last one partial; 4 blocks per chunk.
  SendSpec spec;
  spec.blocks.id = RequestId(9);
  spec.num_tokens = 83;
  spec.blocks.blocks = {BlockId(3), BlockId(0), BlockId(15), BlockId(7), BlockId(8), BlockId(1)};
  spec.lease_expiry = clock_.Now() + absl::Minutes(1);
  ASSERT_THAT(claims_->Add(spec), IsOk());

  grpc::ClientContext context;
  auto reader = stub_->Pull(&context, Request(9, 83, 6));
  std::string payload;
  std::vector<uint32_t> crcs;
  std::vector<int32_t> first_blocks;
  lockstep::v1::BlockChunk chunk;
  lockstep::v1::PullTrailer trailer;
  while (reader->Read(&chunk)) {
    if (chunk.has_trailer()) {
      trailer = chunk.trailer();
      continue;
    }
    EXPECT_EQ(chunk.pool(), lockstep::v1::KV_POOL_TARGET);
    EXPECT_EQ(chunk.block_offset(), 0);
    EXPECT_LE(chunk.payload().size(), 4u << 10);
    first_blocks.push_back(chunk.first_block());
    payload += chunk.payload();
    crcs.insert(crcs.end(), chunk.block_crc32c().begin(), chunk.block_crc32c().end());
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(first_blocks, (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(trailer.target_blocks(), 6);
  EXPECT_EQ(trailer.draft_blocks(), 0);
  EXPECT_EQ(trailer.payload_bytes(), 6 << 10);
  const size_t block_bytes = descriptor_.target->BlockBytes();
  ASSERT_EQ(payload.size(), 6 * block_bytes);
  ASSERT_EQ(crcs.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const float* block =
        slab_.data() + spec.blocks.blocks[i].value() * descriptor_.target->BlockFloats();
    EXPECT_EQ(std::memcmp(payload.data() + i * block_bytes, block, block_bytes), 0) << i;
    EXPECT_EQ(crcs[i], Crc32c(block, block_bytes)) << i;
  }
  ASSERT_TRUE(events_->WaitNonEmpty(absl::Seconds(20)));
  const std::vector<TransferEvent> events = events_->Drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].status, IsOk());
}

TEST_F(KvTransferServerTest, RefusesUnknownClaimsAndBadDescriptors) {
  grpc::ClientContext unknown;
  auto reader = stub_->Pull(&unknown, Request(1, 16, 1));
  lockstep::v1::BlockChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("no transfer claim for request 1"));

  SendSpec spec;
  spec.blocks.id = RequestId(2);
  spec.num_tokens = 16;
  spec.blocks.blocks = {BlockId(4)};
  spec.lease_expiry = clock_.Now() + absl::Minutes(1);
  ASSERT_THAT(claims_->Add(spec), IsOk());
  lockstep::v1::PullRequest bad = Request(2, 16, 1);
  bad.mutable_kv()->clear_model();
  grpc::ClientContext context;
  reader = stub_->Pull(&context, bad);
  EXPECT_FALSE(reader->Read(&chunk));
  status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("model is empty"));
  ASSERT_TRUE(events_->WaitNonEmpty(absl::Seconds(20)));
  const std::vector<TransferEvent> events = events_->Drain();
  ASSERT_EQ(events.size(), 1u);  // the claim ended with the failed pull
  EXPECT_THAT(events[0].status, StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KvTransferServerStartTest, AnAddressItCannotBindIsAnError) {
  FakeClock clock;
  KvDescriptor descriptor;
  descriptor.model = "m";
  descriptor.target = kv::BlockLayout{};
  std::vector<float> slab(descriptor.target->BlockFloats());
  KvTransferServerOptions options;
  options.listen_address = "203.0.113.1:0";  // TEST-NET-3: not an address of this host
  EXPECT_THAT(KvTransferServer::Start(options, descriptor, KvSlabs{{slab.data(), 1}, {}},
                                      SendClaims::Create(&clock, std::make_shared<EventQueue>()))
                  .status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot listen on 203.0.113.1")));
}

TEST(KvTransferServerOptionsTest, Validate) {
  KvTransferServerOptions options;
  EXPECT_THAT(options.Validate(), IsOk());
  options.chunk_bytes = 100;
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("chunk_bytes 100 is outside")));
  options = {};
  options.max_concurrent_pulls = 0;
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
  options = {};
  options.listen_address = "nowhere";
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument));
}

// The data plane is advertised through DataPlane and speaks tcp_wire.h: a refusal is a
// status frame and the connection serves the next pull; a malformed request is refused
// and the connection closed.
TEST_F(KvTransferServerTest, DataPlaneAnswersOnTheSameConnectionAndRefusesGarbage) {
  grpc::ClientContext context;
  lockstep::v1::DataPlaneInfo info;
  ASSERT_TRUE(stub_->DataPlane(&context, lockstep::v1::DataPlaneRequest(), &info).ok());
  ASSERT_EQ(info.tcp_address(), server_->tcp_address());
  ASSERT_FALSE(info.tcp_address().empty());
  absl::StatusOr<TcpSocket> socket =
      ConnectTcp(info.tcp_address(), absl::Now() + absl::Seconds(10));
  ASSERT_THAT(socket.status(), IsOk());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  const auto read_status = [&](const TcpSocket& s) -> absl::Status {
    FrameHeader frame;
    RETURN_IF_ERROR(RecvAll(s, &frame, sizeof(frame), deadline, nullptr));
    if (frame.kind != FrameKind::kStatus) return absl::InternalError("not a status frame");
    std::string text(frame.size, '\0');
    RETURN_IF_ERROR(RecvAll(s, text.data(), text.size(), deadline, nullptr));
    return StatusFromFrame(frame, text);
  };
  for (int i = 0; i < 2; ++i) {  // no claim: refused, twice on one connection
    const std::string bytes = Request(404, 16, 1).SerializeAsString();
    RequestPrefix prefix;
    prefix.request_bytes = static_cast<uint32_t>(bytes.size());
    prefix.timeout_ms = 10'000;
    ASSERT_THAT(SendAll(*socket, &prefix, sizeof(prefix), deadline, nullptr), IsOk());
    ASSERT_THAT(SendAll(*socket, bytes.data(), bytes.size(), deadline, nullptr), IsOk());
    EXPECT_THAT(read_status(*socket), StatusIs(absl::StatusCode::kNotFound, HasSubstr("404")));
  }
  RequestPrefix garbage;
  garbage.magic = 0x12345678;
  ASSERT_THAT(SendAll(*socket, &garbage, sizeof(garbage), deadline, nullptr), IsOk());
  EXPECT_THAT(read_status(*socket),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a KV pull request")));
  char byte;
  EXPECT_THAT(RecvAll(*socket, &byte, 1, deadline, nullptr),
              StatusIs(absl::StatusCode::kUnavailable));  // closed
}

}  // namespace
}  // namespace lockstep::transfer
