// The KV transceiver of a context or generation rank: the gRPC KV transfer service and
// its TCP data plane, listening on the host of the worker's --listen address (ports of
// their own).
#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/transfer/grpc_transceiver.h"
#include "runtime/transfer/kv_descriptor.h"
#include "runtime/worker/executor_settings.h"
#include "runtime/worker/worker.h"

namespace lockstep::worker {

absl::StatusOr<std::unique_ptr<transfer::Transceiver>> Worker::CreateTransceiver(
    const kv::KvManager& kv, const exec::ExecutorConfig& config) {
  transfer::GrpcTransceiverOptions options;
  options.name = absl::StrCat(config.instance, " rank ", config.rank);
  // Both instances must serve the same model build: its name and paths identify it.
  const config::ModelConfig& model = options_.deployment.model;
  options.descriptor = transfer::DescribeKv(
      kv, absl::StrCat(model.name, "@", absl::Hex(ModelSalt(model), absl::kZeroPad16)),
      KvDtypeName(*instance_));
  options.copiers = transfer::CopiersOf(kv);
  ASSIGN_OR_RETURN(const HostPort listen, ParseHostPort(options_.listen_address));
  options.server.listen_address = listen.WithPort(0).ToString();
  options.server.tcp_data_plane = instance_->transfer.tcp_data_plane;
  options.pull_over_tcp = instance_->transfer.tcp_data_plane;
  options.ucx = instance_->transfer.transport == config::TransferTransport::kUcx;
  ASSIGN_OR_RETURN(std::unique_ptr<transfer::GrpcTransceiver> transceiver,
                   transfer::GrpcTransceiver::Create(std::move(options), SystemClock::Get()));
  transceiver_address_ = transceiver->address();
  LOCKSTEP_LOG_INFO(
      "worker", "KV transfer service at {}, TCP data plane at {}, UCX data plane {}",
      transceiver->address(),
      transceiver->data_plane_address().empty() ? "(off)" : transceiver->data_plane_address(),
      transceiver->ucx_data_plane() == nullptr ? "off" : "on");
  return std::unique_ptr<transfer::Transceiver>(std::move(transceiver));
}

}  // namespace lockstep::worker
