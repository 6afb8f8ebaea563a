#include "runtime/transfer/receive_workers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "grpcpp/grpcpp.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/transfer/chunk_codec.h"

namespace lockstep::transfer {

ReceiveWorkers::ReceiveWorkers(int num_threads, std::unique_ptr<KvPuller> puller,
                               std::shared_ptr<EventQueue> events, bool pull_over_tcp,
                               std::unique_ptr<UcxPuller> ucx)
    : puller_(std::move(puller)),
      ucx_(std::move(ucx)),
      events_(std::move(events)),
      pull_over_tcp_(pull_over_tcp) {
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { Loop(); });
}

ReceiveWorkers::~ReceiveWorkers() { Shutdown(); }

absl::Status ReceiveWorkers::Start(const ReceiveSpec& spec) {
  const RequestId id = spec.blocks.id;
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::UnavailableError("the KV receive threads are shutting down");
  if (receives_.contains(id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("request ", id.value(), " is already receiving KV"));
  }
  receives_.emplace(id, Receive{spec, nullptr});
  queue_.push_back(id);
  return absl::OkStatus();
}

void ReceiveWorkers::Cancel(RequestId id) {
  std::shared_ptr<PullControl> control;
  {
    absl::MutexLock lock(&mu_);
    auto it = receives_.find(id);
    if (it == receives_.end()) return;
    if (it->second.control == nullptr) {  // still queued
      queue_.erase(std::find(queue_.begin(), queue_.end(), id));
      events_->Push({TransferKind::kReceive, id, it->second.spec.blocks.generation,
                     absl::CancelledError(absl::StrCat("KV receive of request ", id.value(),
                                                       " cancelled before it started"))});
      receives_.erase(it);
      return;
    }
    control = it->second.control;
  }
  control->Cancel();  // the running thread reports it once its pull has returned
}

void ReceiveWorkers::Shutdown() {
  std::vector<std::shared_ptr<PullControl>> running;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    queue_.clear();
    for (auto& [id, receive] : receives_) {
      if (receive.control != nullptr) running.push_back(receive.control);
    }
  }
  for (const std::shared_ptr<PullControl>& control : running) control->Cancel();
  for (std::thread& thread : threads_) thread.join();
  if (ucx_ != nullptr) ReleaseDeferred();
}

void ReceiveWorkers::ReleaseDeferred(bool due_only) {
  ucx_->ReleaseDeferred(
      [this](const std::string& address) -> lockstep::v1::KvUcxService::StubInterface& {
        return UcxStubFor(address);
      },
      due_only);
}

size_t ReceiveWorkers::size() const {
  absl::MutexLock lock(&mu_);
  return receives_.size();
}

RawPullStub& ReceiveWorkers::StubFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<RawPullStub>& stub = stubs_[address];
  if (stub == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(kMaxChunkMessageBytes));
    stub = std::make_unique<RawPullStub>(
        security::CreateChannel(address, args));
  }
  return *stub;
}

lockstep::v1::KvUcxService::Stub& ReceiveWorkers::UcxStubFor(const std::string& address) {
  std::shared_ptr<grpc::Channel> channel = StubFor(address).channel();
  absl::MutexLock lock(&mu_);
  std::unique_ptr<lockstep::v1::KvUcxService::Stub>& stub = ucx_stubs_[address];
  if (stub == nullptr) stub = lockstep::v1::KvUcxService::NewStub(channel);
  return *stub;
}

void ReceiveWorkers::NoteFallback(const std::string& address, const absl::Status& why) {
  ++pulls_fallen_back_;
  {
    absl::MutexLock lock(&mu_);
    if (!fallbacks_logged_.insert(address).second) return;
  }
  LOCKSTEP_LOG_WARN("transfer",
                    "KV pulls from {} go over gRPC while its TCP data plane refuses them: {} "
                    "(logged once per peer)",
                    address, why.ToString());
}

absl::Status ReceiveWorkers::Pull(const ReceiveSpec& spec, PullControl& control,
                                  std::optional<uint64_t>* release_offer) {
  const ContextHandle& source = spec.source;
  if (ucx_ != nullptr) {
    if (control.cancelled()) return ReceiveCancelledError(spec.blocks.id);
    UcxPuller::Outcome outcome;
    absl::Status status = ucx_->Pull(UcxStubFor(source.address), spec, control, &outcome);
    *release_offer = outcome.release_offer;
    if (!outcome.fall_back) {
      ++pulls_over_ucx_;
      return status;
    }
    ++ucx_fallbacks_;
    bool first = false;
    {
      absl::MutexLock lock(&mu_);
      first = ucx_fallbacks_logged_.insert(source.address).second;
    }
    if (first) {
      LOCKSTEP_LOG_WARN("transfer", "KV pulls from {} fall back from UCX: {} (logged once per peer)",
                        source.address, status.ToString());
    }
  }
  RawPullStub& stub = StubFor(source.address);
  const auto over_grpc = [&] {
    ++pulls_over_grpc_;
    return puller_->Pull(stub, spec, control);
  };
  if (!pull_over_tcp_) return over_grpc();
  for (bool fresh : {false, true}) {
    if (control.cancelled()) {
      return ReceiveCancelledError(spec.blocks.id);
    }
    absl::StatusOr<DataConnections::Lease> lease =
        connections_.Take(source.address, stub, spec.deadline, fresh);
    if (absl::IsNotFound(lease.status())) break;  // the peer serves Pull only
    if (!lease.ok()) {
      NoteFallback(source.address, lease.status());
      break;
    }
    KvPuller::TcpOutcome outcome;
    absl::Status status = puller_->PullTcp(lease->socket, spec, control, &outcome);
    if (outcome.reusable) connections_.Return(source.address, std::move(lease->socket));
    if (!outcome.answered && absl::IsUnavailable(status) && !control.cancelled()) {
      // An idle connection the peer had closed: once more, on a new one.
      if (lease->pooled) continue;
      // A fresh one refused or closed unanswered (the data plane is full or flooded).
      NoteFallback(source.address, status);
      break;
    }
    ++pulls_over_tcp_;
    return status;
  }
  return over_grpc();
}

void ReceiveWorkers::Loop() {
  for (;;) {
    RequestId id;
    ReceiveSpec spec;
    std::shared_ptr<PullControl> control = std::make_shared<PullControl>();
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_SHARED_LOCKS_REQUIRED(mu_) { return shut_down_ || !queue_.empty(); };
      // Idle: wake now and then; the condition is rechecked on every wake. Deferred
      // Releases that no session call carried within the linger go on their own.
      for (;;) {
        const bool deferred = ucx_ != nullptr && ucx_->HasDeferredReleases();
        if (mu_.AwaitWithTimeout(absl::Condition(&ready),
                                 deferred ? ucx_->release_linger() : absl::Seconds(1))) {
          break;
        }
        if (deferred) {
          mu_.Unlock();
          ReleaseDeferred();
          mu_.Lock();
        }
      }
      if (shut_down_) return;
      id = queue_.front();
      queue_.pop_front();
      Receive& receive = receives_.at(id);
      receive.control = control;
      spec = receive.spec;
    }
    std::optional<uint64_t> release_offer;
    absl::Status status = Pull(spec, *control, &release_offer);
    {
      absl::MutexLock lock(&mu_);
      receives_.erase(id);
      if (!shut_down_) {
        events_->Push({TransferKind::kReceive, id, spec.blocks.generation, std::move(status)});
      }
    }
    // The staged copy's Release, off the receive's path (UcxPuller::Outcome): with the
    // next session call to that rank where it takes deferred ones.
    if (release_offer.has_value() && !ucx_->DeferRelease(spec, *release_offer)) {
      ucx_->Release(UcxStubFor(spec.source.address), spec, *release_offer);
    }
    // Those deferred past the linger (no call to their rank since; the queue may never
    // run empty for an idle thread to send them).
    if (ucx_ != nullptr) ReleaseDeferred(/*due_only=*/true);
  }
}

}  // namespace lockstep::transfer
