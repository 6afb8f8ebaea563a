// KvTransferServer against the generated client stub of proto/kv_transfer.proto: the
// raw stream is an ordinary lockstep.v1.BlockChunk stream on the wire. The pool is fake
// device memory: the server reaches it only through its copier.
#include "runtime/transfer/kv_transfer_server.h"

#include <cstddef>
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
#include "kvcache/block_copier.h"
#include "kvcache/testing/fake_device_allocator.h"
#include "proto/kv_transfer.grpc.pb.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/grpc_credentials.h"
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
    const size_t block_bytes = descriptor_.target->BlockBytes();
    absl::StatusOr<std::byte*> slab = device_.Allocate(kBlocks * block_bytes);
    ASSERT_THAT(slab, IsOk());
    slab_ = *slab;
    absl::StatusOr<std::unique_ptr<kv::BlockCopier>> copier =
        device_.MakeCopier(slab_, *descriptor_.target, kBlocks);
    ASSERT_THAT(copier, IsOk());
    copier_ = std::move(*copier);
    contents_.resize(kBlocks * block_bytes);
    for (std::byte& b : contents_) b = static_cast<std::byte>(rng());
    std::vector<kv::BlockSpan> all;
    for (int32_t b = 0; b < kBlocks; ++b) all.push_back({BlockId(b), 0, block_bytes});
    ASSERT_THAT(copier_->CopyIn(contents_, all), IsOk());
    KvTransferServerOptions options;
    options.chunk_bytes = 4 << 10;
    absl::StatusOr<std::unique_ptr<KvTransferServer>> server =
        KvTransferServer::Start(options, descriptor_, KvCopiers{copier_.get(), nullptr}, claims_);
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

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
    server_.reset();
    copier_.reset();
    if (slab_ != nullptr) device_.Free(slab_, kBlocks * descriptor_.target->BlockBytes());
  }

  uint64_t seed_ = 0;
  FakeClock clock_;
  KvDescriptor descriptor_;
  kv::testing::FakeDeviceAllocator device_;
  std::byte* slab_ = nullptr;
  std::unique_ptr<kv::BlockCopier> copier_;
  std::vector<std::byte> contents_;  // what the pool holds, block after block
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
    const std::byte* block = contents_.data() + spec.blocks.blocks[i].value() * block_bytes;
    EXPECT_EQ(std::memcmp(payload.data() + i * block_bytes, block, block_bytes), 0) << i;
    EXPECT_EQ(crcs[i], Crc32c(block, block_bytes)) << i;
  }
  // One copy out per chunk (after the one copy in that filled the pool).
  EXPECT_EQ(device_.copy_out_calls(), 2);
  EXPECT_EQ(device_.bytes_out(), static_cast<int64_t>(6 * block_bytes));
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
  std::vector<std::byte> slab(descriptor.target->BlockBytes());
  kv::HostBlockCopier copier(slab.data(), *descriptor.target, 1);
  const std::shared_ptr<SendClaims> claims =
      SendClaims::Create(&clock, std::make_shared<EventQueue>());
  KvTransferServerOptions options;
  options.listen_address = "203.0.113.1:0";  // TEST-NET-3: not an address of this host
  EXPECT_THAT(KvTransferServer::Start(options, descriptor, KvCopiers{&copier, nullptr}, claims)
                  .status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot listen on 203.0.113.1")));
  // A copier whose layout is not the descriptor's, or none, is refused before listening.
  kv::BlockLayout other = *descriptor.target;
  other.head_dim = 2;
  kv::HostBlockCopier wrong(slab.data(), other, 1);
  options.listen_address = "127.0.0.1:0";
  EXPECT_THAT(KvTransferServer::Start(options, descriptor, KvCopiers{&wrong, nullptr}, claims)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("copier has layout")));
  EXPECT_THAT(KvTransferServer::Start(options, descriptor, KvCopiers{}, claims).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no copier")));
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

namespace lockstep::transfer {
namespace {

// With a cluster token, each KvTransferService method needs it: without it or with a
// wrong one the call is UNAUTHENTICATED and serves nothing; with it the call is served
// (here: no such claim).
TEST_F(KvTransferServerTest, EveryMethodNeedsTheClusterToken) {
  security::ClusterSecurity cluster;
  cluster.cluster_token = "kv-token";
  std::unique_ptr<KvTransferServer> server;
  {
    security::ScopedClusterSecurity scoped(cluster);
    absl::StatusOr<std::unique_ptr<KvTransferServer>> started = KvTransferServer::Start(
        KvTransferServerOptions{}, descriptor_, KvCopiers{copier_.get(), nullptr}, claims_);
    ASSERT_THAT(started.status(), IsOk());
    server = std::move(*started);
  }
  for (const std::string token : {"", "kv-tokem", "kv-token"}) {
    SCOPED_TRACE("token \"" + token + "\"");
    security::ClusterSecurity client;
    client.cluster_token = token;
    auto stub = lockstep::v1::KvTransferService::NewStub(
        security::CreateChannel(server->address(), client));
    const bool right = token == "kv-token";

    grpc::ClientContext data_plane_context;
    lockstep::v1::DataPlaneInfo info;
    const grpc::Status data_plane =
        stub->DataPlane(&data_plane_context, lockstep::v1::DataPlaneRequest(), &info);
    EXPECT_EQ(data_plane.error_code(),
              right ? grpc::StatusCode::OK : grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(info.tcp_address().empty(), !right);

    grpc::ClientContext pull_context;
    auto reader = stub->Pull(&pull_context, Request(404, 16, 1));
    lockstep::v1::BlockChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    EXPECT_EQ(reader->Finish().error_code(),
              right ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::UNAUTHENTICATED);
  }
  server->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace lockstep::transfer
