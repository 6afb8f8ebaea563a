#include "runtime/transfer/ucx_puller.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "runtime/transfer/block_writer.h"
#include "runtime/transfer/ucx_published.h"

namespace lockstep::transfer {
namespace {

using kv::PoolKind;

// A UCX wait on the context rank unanswered this long checks, every kLivenessEvery, that
// the rank still lives (ContextRankLiveness), each check waiting at most
// kLivenessTimeout (no answer by then proves nothing: the wait goes on). A session Offer
// is answered, and a 64-block staged copy read, in well under 1 ms (docs/perf/ucx.md).
constexpr absl::Duration kLivenessGrace = absl::Milliseconds(100);
constexpr absl::Duration kLivenessEvery = absl::Milliseconds(250);
constexpr absl::Duration kLivenessTimeout = absl::Milliseconds(250);

// Where the staged copy is fetched (not mapped): the size of the pieces it is read in,
// and how many are asked for at once, so that the blocks of one piece are checked and
// written while the next ones arrive (docs/perf/ucx.md: 256 KiB to 2 MiB and 2 to 32
// tried on loopback tcp, none clearly ahead).
constexpr size_t kPieceBytes = size_t{1} << 20;
constexpr int kPiecesInFlight = 4;
// A published offer's pieces, read in place as the context rank publishes its chunks
// (512 KiB by default): smaller, so that reading starts after the first chunk.
constexpr size_t kPublishedPieceBytes = size_t{256} << 10;

// The check a UCX wait on the context rank (a session call's answer, an endpoint's
// handshake, a get or fetch of the staged copy) asks while it goes unanswered
// (UcxWorker::Call's and Get's `peer_check`): from kLivenessGrace after now, every
// kLivenessEvery, a gRPC Release of offer 0 over `stub` (no offer has that id; answered
// by the rank's gRPC threads, whatever its worker is busy with). Only UNAVAILABLE (a
// refused connection: the rank is gone, where a gRPC Offer would have failed at once
// too) is an error, naming the UCX `what` that waited; any answer, or none within
// kLivenessTimeout (a slow port), passes, so a slow but live rank is never failed by it.
// Shared memory detects no dead peer of its own.
std::function<absl::Status()> ContextRankLiveness(lockstep::v1::KvUcxService::StubInterface& stub,
                                                  const std::string& requester,
                                                  absl::string_view what, absl::Time deadline) {
  lockstep::v1::UcxRelease check;
  check.set_requester(requester);
  const absl::Time start = absl::Now();
  return [&stub, check = std::move(check), what = std::string(what), deadline, start,
          next_check = start + kLivenessGrace]() mutable -> absl::Status {
    const absl::Time now = absl::Now();
    if (now < next_check) return absl::OkStatus();
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(std::min(deadline, now + kLivenessTimeout)));
    lockstep::v1::UcxReleaseReply reply;
    const grpc::Status status = stub.Release(&context, check, &reply);
    next_check = absl::Now() + kLivenessEvery;
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat("the context rank is gone: its gRPC port refused a liveness check (",
                     status.error_message(), ") while the UCX ", what, " waited ",
                     absl::FormatDuration(absl::Now() - start)));
  };
}

}  // namespace

UcxPuller::UcxPuller(const KvPuller& puller, KvDescriptor descriptor, KvCopiers copiers,
                     std::shared_ptr<UcxWorker> worker)
    : puller_(puller),
      descriptor_(std::move(descriptor)),
      copiers_(copiers),
      worker_(std::move(worker)) {}

absl::Status UcxPuller::Pull(lockstep::v1::KvUcxService::StubInterface& stub,
                             const ReceiveSpec& spec, PullControl& control,
                             Outcome* outcome) const {
  const kv::BlockRefs& blocks = spec.blocks;
  const ContextHandle& source = spec.source;
  *outcome = {};
  const lockstep::v1::PullRequest request = puller_.Request(spec);

  lockstep::v1::UcxOffer offer;
  bool offered = false;  // over the session
  bool asked_published = false;
  if (std::optional<Session> session = SessionWith(source.address); session.has_value()) {
    lockstep::v1::UcxSessionCall call;
    *call.mutable_offer() = request;
    asked_published = session->maps && !worker_->hooks().no_published;
    call.set_reads_published(asked_published);
    const std::vector<uint64_t> carried =
        session->defers ? TakeDeferred(source.address) : std::vector<uint64_t>();
    for (const uint64_t offer_id : carried) call.add_also_release(offer_id);
    absl::StatusOr<lockstep::v1::UcxSessionAnswer> answer = CallSession(
        stub, *session, std::move(call), spec.deadline, [&control] { return control.cancelled(); });
    if (answer.ok()) {
      offer = std::move(*answer->mutable_offer());
      offered = true;
    } else {
      // Maybe not carried: released again (a copy already dropped is skipped).
      Defer(source.address, carried);
      if (control.cancelled()) return ReceiveCancelledError(blocks.id);
      DropSession(source.address, *session);
      // A refused key, or a rank that serves no calls, touched no claim: over gRPC now.
      if (!absl::IsUnauthenticated(answer.status()) && !absl::IsUnimplemented(answer.status())) {
        return PullError(answer.status().code(), source, answer.status().message());
      }
    }
  }
  if (!offered) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(spec.deadline));
    control.Attach(&context);
    const grpc::Status status = stub.Offer(&context, request, &offer);
    control.Detach();
    if (control.cancelled()) {
      // The claim may have been staged: released rather than left to its deadline.
      if (status.ok() && offer.refusal().empty()) outcome->release_offer = offer.offer_id();
      return ReceiveCancelledError(blocks.id);
    }
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      outcome->fall_back = true;
      return PullError(absl::StatusCode::kUnimplemented, source,
                       "the context rank has no UCX data plane");
    }
    if (!status.ok()) {
      return PullError(FromGrpcStatus(status).code(), source, status.error_message());
    }
    if (!offer.session_key().empty() && !worker_->hooks().no_sessions) {
      absl::MutexLock lock(&mu_);
      sessions_[source.address] = Session{
          .worker_address = offer.worker_address(),
          .key = offer.session_key(),
          .defers = offer.takes_deferred_releases() && !worker_->hooks().no_deferred_releases};
    }
  }
  if (!offer.refusal().empty()) {
    outcome->fall_back = true;
    return PullError(absl::StatusCode::kUnavailable, source,
                     absl::StrCat("UCX offer refused: ", offer.refusal()));
  }
  // From here on the context rank holds a staged copy for us: released on every path,
  // once the receive has been reported (Outcome::release_offer).
  outcome->release_offer = offer.offer_id();

  // The staged copy: the target blocks, then the draft blocks, each block_bytes long,
  // read in pieces of whole blocks of one pool (kPieceBytes, kPublishedPieceBytes for a
  // published offer, or one block).
  struct Piece {
    PoolKind kind;
    int32_t first_block;
    int32_t count;
    size_t bytes;
  };
  const bool published = offer.published();
  const size_t piece_bytes = published ? kPublishedPieceBytes : kPieceBytes;
  std::vector<Piece> pieces;
  int64_t expected = 0;
  int64_t blocks_total = 0;
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    if (kind == PoolKind::kDraft && blocks.draft_generation == 0) continue;
    const kv::BlockLayout& layout = *descriptor_.pool(kind);
    const int32_t count = static_cast<int32_t>(layout.BlocksFor(spec.num_tokens));
    const size_t block_bytes = layout.BlockBytes();
    const int32_t per_piece =
        static_cast<int32_t>(std::max<size_t>(1, piece_bytes / std::max<size_t>(block_bytes, 1)));
    for (int32_t first = 0; first < count; first += per_piece) {
      const int32_t n = std::min(per_piece, count - first);
      pieces.push_back({kind, first, n, static_cast<size_t>(n) * block_bytes});
    }
    expected += static_cast<int64_t>(count) * static_cast<int64_t>(block_bytes);
    blocks_total += count;
  }
  if (published && !asked_published) {
    return PullError(absl::StatusCode::kDataLoss, source,
                     "the UCX offer is published, which this rank did not ask for");
  }
  if (offer.length() != expected || offer.block_crc32c_size() != (published ? 0 : blocks_total)) {
    return PullError(absl::StatusCode::kDataLoss, source,
                     absl::StrCat("the UCX offer stages ", offer.length(), " bytes and ",
                                  offer.block_crc32c_size(), " checksums, expected ", expected,
                                  " bytes and ", blocks_total));
  }

  // Each piece's blocks are checked against their CRC32Cs and only then written (a
  // failed piece writes nothing of itself); pieces come in order.
  BlockWriter writer(blocks, spec.num_tokens, descriptor_, copiers_);
  int crc_at = 0;
  const uint32_t* crc_base = offer.block_crc32c().data();  // a published offer's: in its range
  absl::Status write_error;  // the error a piece's write ended the pull with
  const auto write_piece = [&](size_t i, absl::Span<const std::byte> bytes) -> absl::Status {
    const Piece& piece = pieces[i];
    absl::Status placed = control.cancelled() ? ReceiveCancelledError(blocks.id) : absl::OkStatus();
    if (placed.ok()) {
      const ChunkHeader header{piece.kind == PoolKind::kTarget ? lockstep::v1::KV_POOL_TARGET
                                                               : lockstep::v1::KV_POOL_DRAFT,
                               piece.first_block, 0};
      const absl::Span<const uint32_t> crcs(crc_base + crc_at, static_cast<size_t>(piece.count));
      placed = writer.Place(header, bytes.size(), crcs.size());
      if (placed.ok()) placed = writer.Write(bytes, crcs);
      if (!placed.ok()) placed = PullError(placed.code(), source, placed.message());
    }
    if (!placed.ok()) {
      write_error = placed;
      return placed;
    }
    crc_at += piece.count;
    return absl::OkStatus();
  };

  // The staged bytes: read in place where shared memory maps them, otherwise fetched
  // piece by piece into a buffer of this rank, each piece written while the next ones
  // are on the wire (UcxWorker::GetInPieces).
  // A published offer's range also holds its header (ucx_published.h).
  bool mapped = false;
  absl::StatusOr<UcxWorker::Mapped> map = worker_->MapRemote(
      offer.worker_address(), offer.rkey(), offer.remote_address(),
      published ? PublishedRangeBytes(expected, blocks_total) : static_cast<size_t>(expected));
  NoteMaps(source.address, offer.worker_address(), map.ok());
  lockstep::v1::PullTrailer trailer = offer.trailer();
  if (map.ok()) {
    mapped = true;
    std::optional<PublishedReader> reader;
    PublishedReader::Bounds bounds;
    if (published) {
      if (reinterpret_cast<uintptr_t>(map->data) % 64 != 0) {
        return PullError(absl::StatusCode::kDataLoss, source,
                         "the published UCX offer's range is not 64-byte aligned");
      }
      reader.emplace(map->data, expected, blocks_total);
      crc_base = reader->crcs();
      bounds = {.deadline = spec.deadline,
                .cancelled = [&control] { return control.cancelled(); },
                .check = ContextRankLiveness(stub, request.requester(), "published offer's staging",
                                             spec.deadline)};
    }
    // A published piece is waited for; the wait's error names the pull (a cancel as
    // the receive's).
    const auto await = [&](absl::Status waited) {
      if (absl::IsCancelled(waited)) return ReceiveCancelledError(blocks.id);
      return PullError(waited.code(), source, waited.message());
    };
    size_t at = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (reader.has_value()) {
        if (absl::Status ready = reader->AwaitBlocks(crc_at + pieces[i].count, bounds);
            !ready.ok()) {
          return await(ready);
        }
      }
      if (absl::Status written = write_piece(i, {map->data + at, pieces[i].bytes}); !written.ok()) {
        return written;
      }
      at += pieces[i].bytes;
    }
    if (reader.has_value()) {
      absl::StatusOr<lockstep::v1::PullTrailer> ended = reader->AwaitTrailer(bounds);
      if (!ended.ok()) return await(ended.status());
      trailer = *std::move(ended);
    }
  } else if (published) {
    // Only a published range's reader in place can read it.
    return PullError(
        map.status().code(), source,
        absl::StrCat("the published UCX offer cannot be mapped: ", map.status().message()));
  } else if (!absl::IsUnimplemented(map.status())) {
    return PullError(map.status().code(), source, map.status().message());
  } else {
    // Not zero-filled: the get overwrites all of it.
    std::shared_ptr<std::byte[]> staging(new std::byte[std::max<int64_t>(expected, 1)]);
    UcxWorker::Pieces read{.done = write_piece, .in_flight = kPiecesInFlight};
    for (const Piece& piece : pieces) read.sizes.push_back(piece.bytes);
    const absl::Status got = worker_->GetInPieces(
        offer.worker_address(), offer.rkey(), offer.remote_address(),
        {staging.get(), static_cast<size_t>(expected)}, read, staging, spec.deadline,
        [&control] { return control.cancelled(); },
        ContextRankLiveness(stub, request.requester(), "read of the staged copy", spec.deadline));
    if (!got.ok()) {
      if (!write_error.ok()) return got;  // the piece's own error (already a PullError)
      if (control.cancelled()) return ReceiveCancelledError(blocks.id);
      return PullError(got.code(), source, got.message());
    }
  }
  absl::Status finished = writer.ApplyTrailer(trailer);
  if (finished.ok()) finished = writer.Finish();
  if (!finished.ok()) return PullError(finished.code(), source, finished.message());
  // Read in place past the deadline, the range may have been dropped and reused by
  // another offer while it was read (a checksum checked, then the bytes changed before
  // their copy): the blocks are not trusted.
  if (mapped && absl::Now() >= spec.deadline) {
    return PullError(absl::StatusCode::kDeadlineExceeded, source,
                     "the staged copy was read in place past the pull's deadline");
  }
  return absl::OkStatus();
}

void UcxPuller::NoteMaps(const std::string& address, const std::string& worker_address,
                         bool maps) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(address);
  if (it != sessions_.end() && it->second.worker_address == worker_address) it->second.maps = maps;
}

std::optional<UcxPuller::Session> UcxPuller::SessionWith(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(address);
  if (it == sessions_.end()) return std::nullopt;
  return it->second;
}

void UcxPuller::DropSession(const std::string& address, const Session& session) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(address);
  if (it != sessions_.end() && it->second.key == session.key) sessions_.erase(it);
}

absl::StatusOr<lockstep::v1::UcxSessionAnswer> UcxPuller::CallSession(
    lockstep::v1::KvUcxService::StubInterface& stub, const Session& session,
    lockstep::v1::UcxSessionCall call, absl::Time deadline,
    const std::function<bool()>& cancelled) const {
  call.set_session_key(session.key);
  call.set_timeout_micros(absl::ToInt64Microseconds(deadline - absl::Now()));
  const std::string& requester =
      call.has_offer() ? call.offer().requester() : call.release().requester();
  absl::StatusOr<std::string> answered =
      worker_->Call(session.worker_address, call.SerializeAsString(), deadline, cancelled,
                    ContextRankLiveness(stub, requester, "session call", deadline));
  if (!answered.ok()) return answered.status();
  lockstep::v1::UcxSessionAnswer answer;
  if (!answer.ParseFromString(*answered)) {
    return absl::DataLossError(
        absl::StrCat("a malformed UCX session answer (", answered->size(), " bytes)"));
  }
  if (answer.code() != 0) {
    const bool known = answer.code() > 0 && answer.code() <= 16;
    return absl::Status(
        known ? static_cast<absl::StatusCode>(answer.code()) : absl::StatusCode::kUnknown,
        answer.message());
  }
  return answer;
}

}  // namespace lockstep::transfer
