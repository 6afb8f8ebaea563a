#include "runtime/transfer/grpc_transceiver.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace lockstep::transfer {

absl::Status GrpcTransceiverOptions::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("transceiver: name is empty");
  RETURN_IF_ERROR(descriptor.Validate());
  if (absl::Status s = CheckCopiers(descriptor, copiers); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("transceiver: ", s.message()));
  }
  if (max_concurrent_receives < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transceiver: max_concurrent_receives must be >= 1, got ", max_concurrent_receives));
  }
  return server.Validate();
}

GrpcTransceiver::GrpcTransceiver(GrpcTransceiverOptions options, Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      events_(std::make_shared<EventQueue>()),
      claims_(SendClaims::Create(clock, events_)) {}

absl::StatusOr<std::unique_ptr<GrpcTransceiver>> GrpcTransceiver::Create(
    GrpcTransceiverOptions options, Clock* clock) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GrpcTransceiver> t(new GrpcTransceiver(std::move(options), clock));
  const GrpcTransceiverOptions& o = t->options_;
  std::shared_ptr<UcxWorker> ucx;
  if (o.ucx) {
    absl::StatusOr<std::shared_ptr<UcxWorker>> worker = UcxWorker::Create(o.name, o.ucx_hooks);
    if (!worker.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "transfer.transport ucx: ", worker.status().message(),
          " (check UCX_TLS and UCX_NET_DEVICES, or use transport tcp)"));
    }
    ucx = std::move(*worker);
  }
  ASSIGN_OR_RETURN(t->server_, KvTransferServer::Start(o.server, o.descriptor, o.copiers,
                                                       t->claims_, o.hooks, ucx));
  auto puller = std::make_unique<KvPuller>(o.descriptor, o.copiers, o.name, o.hooks);
  std::unique_ptr<UcxPuller> ucx_puller;
  if (ucx != nullptr) {
    ucx_puller = std::make_unique<UcxPuller>(*puller, o.descriptor, o.copiers, std::move(ucx));
  }
  t->receivers_ =
      std::make_unique<ReceiveWorkers>(o.max_concurrent_receives, std::move(puller), t->events_,
                                       o.pull_over_tcp, std::move(ucx_puller));
  return t;
}

GrpcTransceiver::~GrpcTransceiver() {
  if (receivers_ != nullptr) receivers_->Shutdown();
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
}

absl::Status GrpcTransceiver::StartSend(const SendSpec& spec) {
  RETURN_IF_ERROR(
      CheckBlockRefs(spec.blocks, spec.num_tokens, options_.descriptor, options_.copiers));
  RETURN_IF_ERROR(claims_->Add(spec));
  ++in_flight_;
  return absl::OkStatus();
}

absl::Status GrpcTransceiver::StartReceive(const ReceiveSpec& spec) {
  RETURN_IF_ERROR(
      CheckBlockRefs(spec.blocks, spec.num_tokens, options_.descriptor, options_.copiers));
  if (spec.source.address.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", spec.blocks.id.value(), ": the context handle has no KV transfer address"));
  }
  // The deadline is on the executor's clock; the pull's is real time.
  ReceiveSpec pull = spec;
  pull.deadline = absl::Now() + (spec.deadline - clock_->Now());
  RETURN_IF_ERROR(receivers_->Start(pull));
  ++in_flight_;
  return absl::OkStatus();
}

std::vector<TransferEvent> GrpcTransceiver::Poll() {
  claims_->ExpireLeases(clock_->Now());
  std::vector<TransferEvent> events = events_->Drain();
  in_flight_ -= static_cast<int64_t>(events.size());
  return events;
}

void GrpcTransceiver::Cancel(RequestId id) {
  claims_->Cancel(id);
  receivers_->Cancel(id);
}

}  // namespace lockstep::transfer
