#include "runtime/transfer/kv_transfer_server.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "kvcache/block_copier.h"
#include "proto/kv_transfer.grpc.pb.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/token_checked_service.h"
#include "runtime/transfer/claim_blocks.h"
#include "runtime/transfer/crc32c.h"

namespace lockstep::transfer {
namespace {

using kv::PoolKind;
using lockstep::v1::PullRequest;

// PullRequest is a few hundred bytes; refuse anything much larger.
constexpr int kMaxRequestBytes = 64 << 10;

lockstep::v1::KvPool WirePool(PoolKind kind) {
  return kind == PoolKind::kTarget ? lockstep::v1::KV_POOL_TARGET : lockstep::v1::KV_POOL_DRAFT;
}

absl::Status Mismatch(absl::string_view field, const auto& context, const auto& generation) {
  return absl::FailedPreconditionError(
      absl::StrCat(field, ": context ", context, ", generation ", generation));
}

// Clears the ActivePull's ServerContext before the handler returns.
class DetachOnReturn {
 public:
  explicit DetachOnReturn(ActivePull* pull) : pull_(pull) {}
  ~DetachOnReturn() { pull_->DetachContext(); }

 private:
  ActivePull* pull_;
};

// A gRPC server stream: chunks reference the slab through gRPC slices.
class GrpcChunkSink : public ChunkSink {
 public:
  explicit GrpcChunkSink(grpc::ServerWriter<grpc::ByteBuffer>* writer) : writer_(writer) {}

  // `abort` cancels the call (ActivePull holds its ServerContext), which fails the write.
  bool Write(const ChunkHeader& header, absl::Span<const ByteRange> pieces,
             absl::Span<const uint32_t> crcs, const std::shared_ptr<const void>& keep_alive,
             const absl::Notification& /*abort*/) override {
    return writer_->Write(EncodeChunk(header, pieces, crcs, keep_alive));
  }
  bool WriteTrailer(const lockstep::v1::PullTrailer& trailer) override {
    return writer_->Write(EncodeTrailer(trailer));
  }

 private:
  grpc::ServerWriter<grpc::ByteBuffer>* const writer_;
};

}  // namespace

absl::Status KvTransferServerOptions::Validate() const {
  if (chunk_bytes < kMinChunkBytes || chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat("chunk_bytes ", chunk_bytes, " is outside [",
                                                   kMinChunkBytes, ", ", kMaxChunkBytes, "]"));
  }
  if (max_concurrent_pulls < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_concurrent_pulls must be >= 1, got ", max_concurrent_pulls));
  }
  if (tcp_data_plane) RETURN_IF_ERROR(data_plane.Validate());
  RETURN_IF_ERROR(ucx.Validate());
  if (const absl::StatusOr<HostPort> listen = ParseHostPort(listen_address); !listen.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("listen_address: ", listen.status().message()));
  }
  return absl::OkStatus();
}

KvTransferServer::KvTransferServer(const KvTransferServerOptions& options, KvDescriptor descriptor,
                                   KvCopiers copiers, std::shared_ptr<SendClaims> claims,
                                   TransferHooks hooks)
    : options_(options),
      descriptor_(std::move(descriptor)),
      copiers_(copiers),
      claims_(std::move(claims)),
      hooks_(std::move(hooks)),
      service_([this](grpc::ServerContext* context, const PullRequest& request,
                      grpc::ServerWriter<grpc::ByteBuffer>* writer) {
        return Serve(context, request, writer);
      }) {}

absl::StatusOr<std::unique_ptr<KvTransferServer>> KvTransferServer::Start(
    const KvTransferServerOptions& options, KvDescriptor descriptor, KvCopiers copiers,
    std::shared_ptr<SendClaims> claims, TransferHooks hooks, std::shared_ptr<UcxWorker> ucx_worker) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(descriptor.Validate());
  RETURN_IF_ERROR(CheckCopiers(descriptor, copiers));
  std::unique_ptr<KvTransferServer> server(new KvTransferServer(
      options, std::move(descriptor), copiers, std::move(claims), std::move(hooks)));
  ASSIGN_OR_RETURN(const HostPort listen, ParseHostPort(options.listen_address));
  const std::string& host = listen.host;
  if (options.tcp_data_plane) {
    KvTransferServer* self = server.get();
    TcpDataServer::Handler handler = [self](const PullRequest& request, absl::Time deadline,
                                            ChunkSink& sink) {
      return self->ServePull(request, deadline, /*context=*/nullptr, sink);
    };
    ASSIGN_OR_RETURN(server->tcp_, TcpDataServer::Start(host, std::move(handler), options.data_plane));
    server->service_.set_tcp_address(server->tcp_->address());
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen_address, security::ServerTransportCredentials(), &port);
  server->checked_service_ =
      security::RequireClusterToken<lockstep::v1::KvTransferService>(&server->service_);
  builder.RegisterService(server->checked_service_.get());
  if (ucx_worker != nullptr) {
    KvTransferServer* self = server.get();
    UcxDataServer::Handler handler = [self](const PullRequest& request, absl::Time deadline,
                                            ChunkSink& sink) {
      return self->ServePull(request, deadline, /*context=*/nullptr, sink);
    };
    ASSIGN_OR_RETURN(server->ucx_, UcxDataServer::Start(std::move(ucx_worker), server->descriptor_,
                                                        std::move(handler), options.ucx));
    server->checked_ucx_service_ =
        security::RequireClusterToken<lockstep::v1::KvUcxService>(server->ucx_.get());
    builder.RegisterService(server->checked_ucx_service_.get());
  }
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.SetMaxSendMessageSize(static_cast<int>(kMaxChunkMessageBytes));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("KV transfer service cannot listen on ", options.listen_address));
  }
  server->address_ = listen.WithPort(port).ToString();
  return server;
}

KvTransferServer::~KvTransferServer() { Shutdown(absl::Seconds(1)); }

void KvTransferServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (server_ == nullptr && tcp_ == nullptr) return;  // never started
  claims_->Shutdown();
  if (tcp_ != nullptr) tcp_->Shutdown();
  if (ucx_ != nullptr) ucx_->Shutdown();
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
}

bool KvTransferServer::AcquireTurn(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto turn = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return shut_down_ || active_pulls_ < options_.max_concurrent_pulls;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&turn), deadline) || shut_down_) return false;
  ++active_pulls_;
  return true;
}

void KvTransferServer::ReleaseTurn() {
  absl::MutexLock lock(&mu_);
  --active_pulls_;
}

grpc::Status KvTransferServer::Serve(grpc::ServerContext* context, const PullRequest& request,
                                     grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  absl::Time deadline = absl::InfiniteFuture();
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = absl::FromChrono(context->deadline());
  }
  GrpcChunkSink sink(writer);
  return ToGrpcStatus(ServePull(request, deadline, context, sink));
}

absl::Status KvTransferServer::ServePull(const PullRequest& request, absl::Time deadline,
                                         grpc::ServerContext* context, ChunkSink& sink) {
  const RequestId id(request.context_request_id());
  if (!AcquireTurn(std::min(absl::Now() + options_.max_queue_wait, deadline))) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no turn to serve the pull of request ", id.value(), " by ", request.requester(), ": ",
        options_.max_concurrent_pulls, " pulls running (or shutting down)"));
  }
  absl::Status outcome;
  {
    absl::StatusOr<std::shared_ptr<ActivePull>> pull = claims_->BeginPull(id, context);
    if (!pull.ok()) {
      ReleaseTurn();
      return pull.status();
    }
    DetachOnReturn detach(pull->get());
    outcome = CheckRequest(request, (*pull)->spec());
    // CheckRequest saw to it that a requester with draft blocks pulls a draft cache.
    if (outcome.ok()) outcome = Stream(*pull, /*draft=*/request.draft_blocks() > 0, sink);
    (*pull)->Finish(outcome);
    if (const std::optional<absl::Status> aborted = (*pull)->aborted()) {
      outcome = absl::Status(
          absl::IsUnavailable(*aborted) ? absl::StatusCode::kUnavailable
                                        : absl::StatusCode::kAborted,
          absl::StrCat("the pull of request ", id.value(), " was aborted: ", aborted->message()));
    }
  }
  ReleaseTurn();
  if (!outcome.ok()) {
    LOCKSTEP_LOG_WARN("transfer", "pull of request {} by {} failed: {}", id.value(),
                      request.requester(), outcome.ToString());
  }
  return outcome;
}

absl::Status KvTransferServer::CheckRequest(const PullRequest& request,
                                            const SendSpec& spec) const {
  absl::StatusOr<KvDescriptor> theirs = FromProto(request.kv());
  if (!theirs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pull by ", request.requester(),
                     " carries a bad descriptor: ", theirs.status().message()));
  }
  RETURN_IF_ERROR(CheckCompatible(descriptor_, *theirs));
  const kv::BlockRefs& blocks = spec.blocks;
  if (request.num_tokens() != spec.num_tokens) {
    return Mismatch("num_tokens", spec.num_tokens, request.num_tokens());
  }
  // A generation rank without a draft pool takes the target KV alone.
  ASSIGN_OR_RETURN(const bool draft, MovesDraftKv(*theirs, blocks.draft_generation != 0,
                                                  request.draft_blocks() > 0));
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    if (kind == PoolKind::kDraft && !draft) continue;
    const int64_t need = descriptor_.pool(kind)->BlocksFor(spec.num_tokens);
    const int64_t have =
        kind == PoolKind::kTarget ? request.target_blocks() : request.draft_blocks();
    if (have < need) {
      return absl::FailedPreconditionError(
          absl::StrCat(kv::PoolKindName(kind), " blocks allocated by ", request.requester(), ": ",
                       have, ", the request's ", spec.num_tokens, " tokens need ", need));
    }
  }
  return absl::OkStatus();
}

absl::Status KvTransferServer::Stream(const std::shared_ptr<ActivePull>& pull, bool draft,
                                      ChunkSink& sink) const {
  const kv::BlockRefs& blocks = pull->spec().blocks;
  const int64_t num_tokens = pull->spec().num_tokens;
  lockstep::v1::PullTrailer trailer;
  int64_t index = 0;
  std::vector<kv::BlockSpan> spans;
  std::vector<uint32_t> crcs;
  std::string copy;
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    if (kind == PoolKind::kDraft && !draft) continue;
    const kv::BlockLayout& layout = *descriptor_.pool(kind);
    kv::BlockCopier& copier = *copiers_.pool(kind);
    const std::vector<BlockId>& table =
        kind == PoolKind::kTarget ? blocks.blocks : blocks.draft_blocks;
    const int32_t count = static_cast<int32_t>(layout.BlocksFor(num_tokens));
    const size_t block_bytes = layout.BlockBytes();
    int32_t block = 0;
    size_t offset = 0;  // within `block`
    uint32_t crc = 0;   // of block[0, offset)
    while (block < count) {
      if (pull->aborted().has_value()) return absl::AbortedError("aborted");  // Serve says why
      const ChunkHeader header{WirePool(kind), block, static_cast<int64_t>(offset)};
      spans.clear();
      crcs.clear();
      size_t room = options_.chunk_bytes;
      // Whole blocks while they fit; a block larger than a chunk is split.
      for (int32_t b = block; b < count && room > 0;) {
        const size_t start = b == block ? offset : 0;
        const size_t left = block_bytes - start;
        if (left > room && !spans.empty()) break;
        const size_t take = std::min(left, room);
        spans.push_back({table[b], start, take});
        room -= take;
        if (start + take == block_bytes) ++b;
      }
      const size_t payload_bytes = options_.chunk_bytes - room;
      // The chunk's bytes out of the blocks (wherever they live) into host memory, where
      // they are checksummed and sent.
      // A sink that keeps the stream in its own memory is copied into directly.
      const absl::Span<std::byte> in_sink = sink.NextChunkMemory(payload_bytes);
      const std::shared_ptr<absl::Span<std::byte>> buffer =
          in_sink.size() == payload_bytes ? std::make_shared<absl::Span<std::byte>>(in_sink)
                                          : buffers_.Take(payload_bytes);
      RETURN_IF_ERROR(CopyOutClaimBlocks(
          copier, kind == PoolKind::kTarget ? pull->spec().host_blocks.get() : nullptr, block,
          spans, *buffer));
      const std::byte* data = buffer->data();
      for (const kv::BlockSpan& span : spans) {
        crc = Crc32cExtend(crc, data, span.length);
        data += span.length;
        offset += span.length;
        if (offset == block_bytes) {
          crcs.push_back(crc);
          crc = 0;
          offset = 0;
          ++block;
        }
      }
      const ByteRange whole{reinterpret_cast<const uint8_t*>(buffer->data()), buffer->size()};
      bool written;
      if (hooks_.before_send_chunk) {
        copy.assign(reinterpret_cast<const char*>(whole.data), whole.size);
        hooks_.before_send_chunk({blocks.id, index, header}, &copy, pull->abort_signal());
        if (pull->aborted().has_value()) return absl::AbortedError("aborted");
        const ByteRange changed{reinterpret_cast<const uint8_t*>(copy.data()), copy.size()};
        written = sink.Write(header, {&changed, 1}, crcs, nullptr, pull->abort_signal());
      } else {
        written = sink.Write(header, {&whole, 1}, crcs, buffer, pull->abort_signal());
      }
      if (!written) {
        return absl::UnavailableError(absl::StrCat(
            "the stream to the generation rank closed after ", trailer.payload_bytes(),
            " bytes (cancelled by the puller, its deadline passed, or the connection broke)"));
      }
      trailer.set_payload_bytes(trailer.payload_bytes() + static_cast<int64_t>(payload_bytes));
      ++index;
    }
    if (kind == PoolKind::kTarget) {
      trailer.set_target_blocks(count);
    } else {
      trailer.set_draft_blocks(count);
    }
  }
  if (!sink.WriteTrailer(trailer)) {
    return absl::UnavailableError("the stream to the generation rank closed before the trailer");
  }
  return absl::OkStatus();
}

}  // namespace lockstep::transfer
