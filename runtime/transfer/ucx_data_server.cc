#include "runtime/transfer/ucx_data_server.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "runtime/security/secret.h"
#include "runtime/transfer/ucx_published.h"

namespace lockstep::transfer {
namespace {

using lockstep::v1::PullRequest;

// Largest num_tokens an offer is sized for (a PullRequest is authenticated, but a bad
// one must not make this rank allocate without bound).
constexpr int64_t kMaxTokens = int64_t{1} << 24;

// Writes a pull's chunks, in order, into the registered staging buffer and keeps the
// CRC32Cs and the trailer. The serving thread copies each chunk out of the blocks
// straight into the buffer (NextChunkMemory): one copy instead of two, on every
// transport (docs/perf/ucx.md, 2026-12-06 sixth round, for shared memory).
class StagingSink : public ChunkSink {
 public:
  StagingSink(std::byte* data, int64_t capacity, lockstep::v1::UcxOffer* offer)
      : bytes_(data, capacity), offer_(offer) {}

  bool Write(const ChunkHeader& /*header*/, absl::Span<const ByteRange> pieces,
             absl::Span<const uint32_t> crcs, const std::shared_ptr<const void>& /*keep_alive*/,
             const absl::Notification& abort) override {
    if (abort.HasBeenNotified() || !bytes_.Append(pieces)) return false;
    for (uint32_t crc : crcs) offer_->add_block_crc32c(crc);
    return true;
  }
  bool WriteTrailer(const lockstep::v1::PullTrailer& trailer) override {
    *offer_->mutable_trailer() = trailer;
    return true;
  }
  absl::Span<std::byte> NextChunkMemory(size_t bytes) override { return bytes_.Next(bytes); }
  int64_t used() const { return bytes_.used(); }

 private:
  InPlaceChunks bytes_;
  lockstep::v1::UcxOffer* const offer_;
};

}  // namespace

absl::Status UcxDataServerOptions::Validate() const {
  if (max_staged_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ucx: max_staged_bytes must be >= 1, got ", max_staged_bytes));
  }
  if (staging_chunk_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ucx: staging_chunk_bytes must be >= 1, got ", staging_chunk_bytes));
  }
  if (max_offer_lifetime <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ucx: max_offer_lifetime must be positive");
  }
  if (session_idle_lifetime <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ucx: session_idle_lifetime must be positive");
  }
  if (max_sessions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ucx: max_sessions must be >= 1, got ", max_sessions));
  }
  return absl::OkStatus();
}

UcxDataServer::UcxDataServer(std::shared_ptr<UcxWorker> worker,
                             std::unique_ptr<UcxStagingPool> pool, KvDescriptor descriptor,
                             Handler handler, const UcxDataServerOptions& options)
    : worker_(std::move(worker)),
      pool_(std::move(pool)),
      descriptor_(std::move(descriptor)),
      handler_(std::move(handler)),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : SystemClock::Get()) {}

absl::StatusOr<std::unique_ptr<UcxDataServer>> UcxDataServer::Start(
    std::shared_ptr<UcxWorker> worker, KvDescriptor descriptor, Handler handler,
    const UcxDataServerOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (worker == nullptr) return absl::InvalidArgumentError("ucx: no UCX worker");
  absl::StatusOr<std::unique_ptr<UcxStagingPool>> pool = UcxStagingPool::Create(
      worker, {.chunk_bytes = options.staging_chunk_bytes, .max_bytes = options.max_staged_bytes});
  if (!pool.ok()) return pool.status();
  // The first offer should not pay for the first chunk; if it cannot be made now, each
  // offer tries again (and is refused with UCX's reason).
  if (absl::Status warmed = (*pool)->Warm(); !warmed.ok()) {
    LOCKSTEP_LOG_WARN("transfer", "UCX staging: the first chunk could not be made: {}",
                      warmed.ToString());
  }
  // Offer ids: a generator seeded with 256 bits of the kernel's CSPRNG.
  absl::StatusOr<std::string> seed = security::GenerateToken();
  if (!seed.ok()) return seed.status();
  const std::string seed_bytes = absl::HexStringToBytes(*seed);
  std::vector<uint32_t> words(seed_bytes.size() / 4);
  std::memcpy(words.data(), seed_bytes.data(), seed_bytes.size());
  std::seed_seq seeds(words.begin(), words.end());
  std::unique_ptr<UcxDataServer> server(new UcxDataServer(
      std::move(worker), std::move(*pool), std::move(descriptor), std::move(handler), options));
  UcxDataServer* self = server.get();
  {
    absl::MutexLock lock(&self->mu_);
    self->ids_.seed(seeds);
  }
  server->reaper_ = std::thread([self] { self->ReapLoop(); });
  // Session calls are served until Shutdown.
  if (!self->worker_->hooks().no_sessions) {
    self->worker_->ServeCallsWithReply([self](absl::string_view call, UcxWorker::CallReply& reply) {
      return self->ServeSessionCall(call, reply);
    });
  }
  return server;
}

UcxDataServer::~UcxDataServer() { Shutdown(); }

void UcxDataServer::Shutdown() {
  // No session call runs after this (one running now is waited for).
  worker_->ServeCalls(nullptr);
  absl::flat_hash_map<uint64_t, Staged> dropped;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    dropped.swap(staged_);
    stats_.offers = 0;
    stats_.staged_bytes = 0;
  }
  if (reaper_.joinable()) reaper_.join();
  // `dropped` goes here: each range goes back to the pool.
}

UcxDataServer::Stats UcxDataServer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::StatusOr<int64_t> UcxDataServer::StagedBytes(const PullRequest& request,
                                                   int64_t* blocks) const {
  if (request.num_tokens() < 1 || request.num_tokens() > kMaxTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_tokens ", request.num_tokens(), " is outside [1, ", kMaxTokens, "]"));
  }
  int64_t bytes = 0;
  *blocks = 0;
  for (kv::PoolKind kind : {kv::PoolKind::kTarget, kv::PoolKind::kDraft}) {
    if (kind == kv::PoolKind::kDraft && request.draft_blocks() == 0) continue;
    const std::optional<kv::BlockLayout>& layout = descriptor_.pool(kind);
    if (!layout.has_value()) continue;  // the handler refuses the mismatch
    *blocks += layout->BlocksFor(request.num_tokens());
    bytes += layout->BlocksFor(request.num_tokens()) * static_cast<int64_t>(layout->BlockBytes());
  }
  return bytes;
}

grpc::Status UcxDataServer::Offer(grpc::ServerContext* context, const PullRequest* request,
                                  lockstep::v1::UcxOffer* reply) {
  absl::Time deadline = absl::InfiniteFuture();
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = absl::FromChrono(context->deadline());
  }
  const absl::Status staged = StageOffer(*request, deadline, reply);
  if (staged.ok() && reply->refusal().empty()) {
    reply->set_session_key(SessionKeyFor(request->requester()));
    reply->set_takes_deferred_releases(!worker_->hooks().no_deferred_releases);
  }
  return ToGrpcStatus(staged);
}

UcxDataServer::Session* UcxDataServer::SessionOf(const std::string& requester, absl::Time now,
                                                 bool* expired) {
  *expired = false;
  auto it = sessions_.find(requester);
  if (it == sessions_.end()) return nullptr;
  if (now - it->second.last_used <= options_.session_idle_lifetime) return &it->second;
  sessions_.erase(it);
  ++stats_.sessions_expired;
  *expired = true;
  return nullptr;
}

void UcxDataServer::Touch(Session& session, absl::Time now) {
  session.last_used = std::max(session.last_used, now);
  session.use = ++uses_;
}

std::string UcxDataServer::SessionKeyFor(const std::string& requester) {
  if (worker_->hooks().no_sessions) return "";
  bool expired = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    if (Session* session = SessionOf(requester, now, &expired); session != nullptr) {
      Touch(*session, now);
      return session->key;
    }
  }
  absl::StatusOr<std::string> key = security::GenerateToken();
  if (!key.ok()) {
    LOCKSTEP_LOG_WARN("transfer", "no UCX session for {}: {}", requester, key.status().ToString());
    return "";
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  Session* session = SessionOf(requester, now, &expired);  // another Offer's, made meanwhile
  if (session == nullptr) {
    // Full: the session unused longest makes way (a scan, once per new requester).
    while (sessions_.size() >= static_cast<size_t>(options_.max_sessions)) {
      auto oldest = sessions_.begin();
      for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
        if (it->second.use < oldest->second.use) oldest = it;
      }
      const bool idle = now - oldest->second.last_used > options_.session_idle_lifetime;
      ++(idle ? stats_.sessions_expired : stats_.sessions_evicted);
      sessions_.erase(oldest);
    }
    session = &sessions_[requester];
    session->key = *std::move(key);
  }
  Touch(*session, now);
  return session->key;
}

std::string UcxDataServer::ServeSessionCall(absl::string_view bytes, UcxWorker::CallReply& reply) {
  lockstep::v1::UcxSessionCall call;
  lockstep::v1::UcxSessionAnswer answer;
  const absl::Status served = [&]() -> absl::Status {
    if (!call.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("a malformed UCX session call (", bytes.size(), " bytes)"));
    }
    if (call.call_case() == lockstep::v1::UcxSessionCall::CALL_NOT_SET) {
      return absl::InvalidArgumentError("a UCX session call with neither an offer nor a release");
    }
    const std::string& requester =
        call.has_offer() ? call.offer().requester() : call.release().requester();
    {
      absl::MutexLock lock(&mu_);
      const absl::Time now = clock_->Now();
      bool expired = false;
      Session* session = SessionOf(requester, now, &expired);
      if (session == nullptr || !security::ConstantTimeEquals(call.session_key(), session->key)) {
        ++stats_.session_refused;
        if (session != nullptr) {
          return absl::UnauthenticatedError(
              absl::StrCat("the UCX session key of ", requester, " does not match"));
        }
        // Dropped (or never given): the requester offers over gRPC for a new key.
        return absl::UnauthenticatedError(
            expired ? absl::StrCat("no UCX session of ", requester, ": it expired, unused for ",
                                   absl::FormatDuration(options_.session_idle_lifetime))
                    : absl::StrCat("no UCX session of ", requester,
                                   " (evicted for a newer requester, this rank restarted, or "
                                   "it was given none)"));
      }
      Touch(*session, now);
      ++stats_.session_calls;
    }
    if (!worker_->hooks().no_deferred_releases) {
      for (const uint64_t offer_id : call.also_release()) {
        if (DropOffer(offer_id, requester).ok()) {
          absl::MutexLock lock(&mu_);
          ++stats_.released_deferred;
        }
      }
    }
    if (call.has_release()) return DropOffer(call.release().offer_id(), requester);
    if (call.timeout_micros() <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("the UCX session offer of request ", call.offer().context_request_id(),
                       " came with no time left (", call.timeout_micros(), " us)"));
    }
    const absl::Time deadline = absl::Now() + absl::Microseconds(call.timeout_micros());
    if (!call.reads_published() || worker_->hooks().no_published) {
      return StageOffer(call.offer(), deadline, answer.mutable_offer());
    }
    // Answered (code OK) from inside the staging, once the claim is taken.
    return StageOffer(call.offer(), deadline, answer.mutable_offer(),
                      [&] { reply.Answer(answer.SerializeAsString()); });
  }();
  answer.set_code(static_cast<int32_t>(served.code()));
  answer.set_message(std::string(served.message()));
  if (!served.ok()) answer.clear_offer();
  return answer.SerializeAsString();
}

absl::Status UcxDataServer::StageOffer(const PullRequest& request, absl::Time deadline,
                                       lockstep::v1::UcxOffer* reply,
                                       const std::function<void()>& answer) {
  deadline = std::min(deadline, absl::Now() + options_.max_offer_lifetime);
  int64_t blocks = 0;
  absl::StatusOr<int64_t> bytes = StagedBytes(request, &blocks);
  if (!bytes.ok()) return bytes.status();
  const bool publish = answer != nullptr;
  // A published range carries its header after the bytes.
  const int64_t range_bytes = publish ? static_cast<int64_t>(PublishedRangeBytes(*bytes, blocks))
                                      : std::max<int64_t>(*bytes, 1);
  const auto refuse = [&](absl::string_view why) {
    absl::MutexLock lock(&mu_);
    ++stats_.refused;
    reply->set_refusal(std::string(why));
    return absl::OkStatus();
  };
  bool full = false;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("the UCX data plane is shut down");
    full = reserved_bytes_ + range_bytes > options_.max_staged_bytes;
    if (!full) reserved_bytes_ += range_bytes;
  }
  if (full) {
    return refuse(absl::StrCat("staging ", range_bytes, " more bytes would pass ",
                               options_.max_staged_bytes));
  }
  absl::StatusOr<UcxStagingPool::Range> taken = pool_->Take(static_cast<size_t>(range_bytes));
  const auto unreserve = [&] {
    absl::MutexLock lock(&mu_);
    reserved_bytes_ -= range_bytes;
  };
  if (!taken.ok()) {
    unreserve();
    LOCKSTEP_LOG_WARN("transfer", "UCX offer of request {} refused: {}",
                      request.context_request_id(), taken.status().ToString());
    return refuse(taken.status().ToString());
  }
  auto range = std::make_shared<UcxStagingPool::Range>(*std::move(taken));
  reply->set_worker_address(worker_->address());
  reply->set_rkey(range->rkey());
  reply->set_remote_address(range->address());
  if (!publish) {
    StagingSink sink(range->data(), *bytes, reply);
    if (absl::Status served = handler_(request, deadline, sink); !served.ok()) {
      unreserve();
      return served;
    }
    reply->set_length(sink.used());
    absl::StatusOr<uint64_t> id =
        Keep(std::move(range), range_bytes, deadline, request.requester());
    if (!id.ok()) return id.status();
    reply->set_offer_id(*id);
    return absl::OkStatus();
  }
  // Published: kept (and answered) once the claim is taken; `range` pins the bytes
  // while they are written, whatever drops the offer meanwhile. The reader checks the
  // staged length against the published trailer.
  reply->set_length(*bytes);
  absl::Status kept;
  std::optional<uint64_t> id;
  PublishingSink sink(range->data(), *bytes, blocks, [&] {
    absl::StatusOr<uint64_t> made = Keep(range, range_bytes, deadline, request.requester());
    if (!made.ok()) {
      kept = made.status();
      return;
    }
    id = *made;
    reply->set_offer_id(*id);
    reply->set_published(true);
    {
      absl::MutexLock lock(&mu_);
      ++stats_.published;
    }
    answer();
  });
  absl::Status served = handler_(request, deadline, sink);
  if (served.ok() && !kept.ok()) served = kept;
  sink.Finish(served);
  if (id.has_value()) {
    // Answered: the reader meets a failure in the range.
    if (!served.ok()) {
      LOCKSTEP_LOG_WARN("transfer", "UCX published offer of request {} failed after its answer: {}",
                        request.context_request_id(), served.ToString());
    }
    return absl::OkStatus();
  }
  if (!sink.started()) unreserve();  // Keep never ran: the range goes back unkept
  if (!served.ok()) return served;
  // Every pull stages a chunk (num_tokens >= 1): not reached by a served pull.
  return absl::InternalError("a published offer staged no chunk");
}

absl::StatusOr<uint64_t> UcxDataServer::Keep(std::shared_ptr<UcxStagingPool::Range> range,
                                             int64_t bytes, absl::Time expiry,
                                             const std::string& requester) {
  Staged staged;
  staged.range = std::move(range);
  staged.bytes = bytes;
  staged.expiry = expiry;
  staged.requester = requester;
  absl::MutexLock lock(&mu_);
  if (shut_down_) {
    reserved_bytes_ -= bytes;
    return absl::UnavailableError("the UCX data plane is shut down");
  }
  uint64_t id = 0;
  do {
    id = ids_();
  } while (id == 0 || staged_.contains(id));
  staged_.emplace(id, std::move(staged));
  ++version_;
  ++stats_.offers;
  stats_.staged_bytes += bytes;
  return id;
}

grpc::Status UcxDataServer::Release(grpc::ServerContext* /*context*/,
                                    const lockstep::v1::UcxRelease* request,
                                    lockstep::v1::UcxReleaseReply* /*reply*/) {
  if (request->offer_id() == 0) {  // no offer: a puller's liveness check (UcxRelease)
    absl::MutexLock lock(&mu_);
    ++stats_.liveness_checks;
    return grpc::Status::OK;
  }
  return ToGrpcStatus(DropOffer(request->offer_id(), request->requester()));
}

absl::Status UcxDataServer::DropOffer(uint64_t offer_id, const std::string& requester) {
  Staged dropped;
  absl::MutexLock lock(&mu_);
  auto it = staged_.find(offer_id);
  if (it == staged_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no staged UCX offer ", offer_id, " (released, expired or never made)"));
  }
  if (it->second.requester != requester) {
    ++stats_.release_refused;
    return absl::PermissionDeniedError(absl::StrCat("UCX offer ", offer_id, " was not made to ",
                                                    requester, ": it stays staged for its owner"));
  }
  dropped = std::move(it->second);
  staged_.erase(it);
  reserved_bytes_ -= dropped.bytes;
  --stats_.offers;
  stats_.staged_bytes -= dropped.bytes;
  ++stats_.released;
  mu_.Unlock();
  dropped = Staged();  // give the range back outside the lock
  mu_.Lock();
  return absl::OkStatus();
}

void UcxDataServer::ReapLoop() {
  absl::MutexLock lock(&mu_);
  while (!shut_down_) {
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [id, staged] : staged_) next = std::min(next, staged.expiry);
    // Woken by any change of `staged_` (a new offer may expire earlier) or by Shutdown.
    const uint64_t version = version_;
    const auto changed = [this, version]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shut_down_ || version_ != version;
    };
    mu_.AwaitWithDeadline(absl::Condition(&changed), next);
    if (shut_down_) return;
    const absl::Time now = absl::Now();
    std::vector<Staged> expired;
    for (auto it = staged_.begin(); it != staged_.end();) {
      if (it->second.expiry > now) {
        ++it;
        continue;
      }
      reserved_bytes_ -= it->second.bytes;
      --stats_.offers;
      stats_.staged_bytes -= it->second.bytes;
      ++stats_.expired;
      expired.push_back(std::move(it->second));
      staged_.erase(it++);
    }
    if (expired.empty()) continue;
    mu_.Unlock();
    expired.clear();
    mu_.Lock();
  }
}

}  // namespace lockstep::transfer
