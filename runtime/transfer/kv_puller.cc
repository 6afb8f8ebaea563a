#include "runtime/transfer/kv_puller.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "runtime/transfer/block_writer.h"
#include "runtime/transfer/chunk_codec.h"
#include "runtime/transfer/crc32c.h"

namespace lockstep::transfer {
namespace {

// Checks a gRPC chunk and copies its payload out of gRPC's buffers into the blocks (in
// place when it arrived in one slice, else gathered into `staging` first).
absl::Status ApplyChunk(BlockWriter& writer, const DecodedChunk& chunk,
                        std::vector<std::byte>& staging) {
  if (chunk.trailer.has_value()) {
    if (chunk.payload.size() != 0) {
      return absl::DataLossError(
          absl::StrCat("the trailer carries ", chunk.payload.size(), " payload bytes"));
    }
    return writer.ApplyTrailer(*chunk.trailer);
  }
  const size_t size = chunk.payload.size();
  RETURN_IF_ERROR(writer.Place(chunk.header, size, chunk.block_crc32c.size()));
  const uint8_t* first = nullptr;
  int runs = 0;
  chunk.payload.ForEachRun(0, size, [&](const uint8_t* data, size_t) {
    if (runs++ == 0) first = data;
  });
  if (runs <= 1) {
    return writer.Write({reinterpret_cast<const std::byte*>(first), size}, chunk.block_crc32c);
  }
  staging.resize(size);
  size_t at = 0;
  chunk.payload.ForEachRun(0, size, [&](const uint8_t* data, size_t n) {
    std::memcpy(staging.data() + at, data, n);
    at += n;
  });
  return writer.Write(staging, chunk.block_crc32c);
}

}  // namespace

absl::Status PullError(absl::StatusCode code, const ContextHandle& source,
                       absl::string_view message) {
  return absl::Status(code, absl::StrCat("pull of request ", source.request_id.value(), " from ",
                                         source.address, ": ", message));
}

absl::Status ReceiveCancelledError(RequestId id) {
  return absl::CancelledError(absl::StrCat("KV receive of request ", id.value(), " cancelled"));
}

void PullControl::Attach(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  context_ = context;
  if (cancelled_) context_->TryCancel();
}

void PullControl::Detach() {
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
}

void PullControl::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

bool PullControl::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

KvPuller::KvPuller(KvDescriptor descriptor, KvCopiers copiers, std::string requester,
                   TransferHooks hooks)
    : descriptor_(std::move(descriptor)),
      copiers_(copiers),
      requester_(std::move(requester)),
      hooks_(std::move(hooks)) {}

lockstep::v1::PullRequest KvPuller::Request(const ReceiveSpec& spec) const {
  const kv::BlockRefs& blocks = spec.blocks;
  const ContextHandle& source = spec.source;
  lockstep::v1::PullRequest request;
  request.set_context_request_id(source.request_id.value());
  request.set_requester(requester_);
  request.set_requester_request_id(blocks.id.value());
  ToProto(descriptor_, request.mutable_kv());
  request.set_num_tokens(spec.num_tokens);
  request.set_target_blocks(static_cast<int32_t>(blocks.blocks.size()));
  request.set_draft_blocks(
      blocks.draft_generation == 0 ? 0 : static_cast<int32_t>(blocks.draft_blocks.size()));
  return request;
}

absl::Status KvPuller::Pull(RawPullStub& stub, const ReceiveSpec& spec,
                            PullControl& control) const {
  const kv::BlockRefs& blocks = spec.blocks;
  const ContextHandle& source = spec.source;
  const lockstep::v1::PullRequest request = Request(spec);

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(spec.deadline));
  BlockWriter writer(blocks, spec.num_tokens, descriptor_, copiers_);
  std::vector<std::byte> staging;
  absl::Status local;  // a failure found here (malformed stream, checksum)
  control.Attach(&context);
  {
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader = stub.Pull(&context, request);
    grpc::ByteBuffer message;
    for (int64_t index = 0; reader->Read(&message); ++index) {
      if (control.cancelled()) break;  // no block is written after a cancel
      absl::StatusOr<DecodedChunk> chunk = DecodeChunk(message);
      local = chunk.ok() ? ApplyChunk(writer, *chunk, staging) : chunk.status();
      if (!local.ok()) {
        context.TryCancel();
        break;
      }
      if (hooks_.after_receive_chunk) hooks_.after_receive_chunk(blocks.id, index);
    }
    const grpc::Status finished = reader->Finish();
    control.Detach();
    if (control.cancelled()) {
      return ReceiveCancelledError(blocks.id);
    }
    if (!local.ok()) return PullError(local.code(), source, local.message());
    if (finished.error_code() == grpc::StatusCode::CANCELLED) {
      // Not by us: the context rank aborted the stream.
      return PullError(
          absl::StatusCode::kUnavailable, source,
          absl::StrCat("the context rank ended the stream: ", finished.error_message()));
    }
    if (!finished.ok()) {
      return PullError(FromGrpcStatus(finished).code(), source, finished.error_message());
    }
  }
  const absl::Status complete = writer.Finish();
  if (!complete.ok()) return PullError(complete.code(), source, complete.message());
  return absl::OkStatus();
}

absl::Status KvPuller::PullTcp(const TcpSocket& socket, const ReceiveSpec& spec,
                               PullControl& control, TcpOutcome* outcome) const {
  const kv::BlockRefs& blocks = spec.blocks;
  const ContextHandle& source = spec.source;
  const absl::Time deadline = spec.deadline;
  *outcome = {};
  const StopFn stop = [&control] { return control.cancelled(); };
  const auto fail = [&](const absl::Status& status) {
    if (control.cancelled() || absl::IsCancelled(status)) {
      return ReceiveCancelledError(blocks.id);
    }
    return PullError(status.code(), source, status.message());
  };

  const lockstep::v1::PullRequest request = Request(spec);
  const std::string bytes = request.SerializeAsString();
  RequestPrefix prefix;
  prefix.request_bytes = static_cast<uint32_t>(bytes.size());
  prefix.timeout_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
  absl::Status io =
      SendAll(socket, {{&prefix, sizeof(prefix)}, {const_cast<char*>(bytes.data()), bytes.size()}},
              deadline, stop);
  if (!io.ok()) return fail(io);

  BlockWriter writer(blocks, spec.num_tokens, descriptor_, copiers_);
  std::vector<uint32_t> crcs;
  std::vector<std::byte> staging;
  std::string text;
  for (int64_t index = 0;;) {
    FrameHeader frame;
    io = RecvAll(socket, &frame, sizeof(frame), deadline, stop);
    if (!io.ok()) return fail(io);
    outcome->answered = true;
    switch (frame.kind) {
      case FrameKind::kChunk: {
        if (frame.size > kMaxChunkBytes || frame.num_crcs > frame.size) {
          return fail(
              absl::DataLossError(absl::StrCat("a chunk frame of ", frame.size, " bytes with ",
                                               frame.num_crcs, " checksums is malformed")));
        }
        crcs.resize(frame.num_crcs);
        const ChunkHeader header{static_cast<lockstep::v1::KvPool>(frame.pool), frame.first_block,
                                 frame.block_offset};
        io = writer.Place(header, frame.size, crcs.size());
        if (!io.ok()) return fail(io);
        // The checksums and the payload in one read, the payload into the staging buffer.
        staging.resize(frame.size);
        io = RecvAll(socket,
                     {{crcs.data(), crcs.size() * sizeof(uint32_t)}, {staging.data(), staging.size()}},
                     deadline, stop);
        if (!io.ok()) return fail(io);
        io = writer.Write(staging, crcs);
        if (!io.ok()) return fail(io);
        if (hooks_.after_receive_chunk) hooks_.after_receive_chunk(blocks.id, index);
        ++index;
        break;
      }
      case FrameKind::kTrailer: {
        if (frame.size > 1024) return fail(absl::DataLossError("the trailer frame is too large"));
        text.resize(frame.size);
        io = RecvAll(socket, text.data(), text.size(), deadline, stop);
        if (!io.ok()) return fail(io);
        lockstep::v1::PullTrailer trailer;
        if (!trailer.ParseFromString(text)) {
          return fail(absl::DataLossError("the trailer frame does not parse"));
        }
        io = writer.ApplyTrailer(trailer);
        if (!io.ok()) return fail(io);
        break;
      }
      case FrameKind::kStatus: {
        if (frame.size > kMaxTcpStatusBytes) {
          return fail(absl::DataLossError("the status frame is too large"));
        }
        text.resize(frame.size);
        io = RecvAll(socket, text.data(), text.size(), deadline, stop);
        if (!io.ok()) return fail(io);
        outcome->reusable = true;
        const absl::Status served = StatusFromFrame(frame, text);
        if (!served.ok()) return PullError(served.code(), source, served.message());
        const absl::Status complete = writer.Finish();
        if (!complete.ok()) return PullError(complete.code(), source, complete.message());
        return absl::OkStatus();
      }
      default:
        return fail(absl::DataLossError(
            absl::StrCat("a frame of unknown kind ", static_cast<uint32_t>(frame.kind))));
    }
  }
}

}  // namespace lockstep::transfer
