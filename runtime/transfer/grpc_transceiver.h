// GrpcTransceiver: the real Transceiver (transceiver.h), one per rank, both sides in one
// object. As a context rank it serves KvTransferService (kv_transfer_server.h) for the
// requests it holds under transfer claims (send_claims.h); as a generation rank it pulls
// its requests' KV on its own receive threads (receive_workers.h, kv_puller.h). gRPC
// carries the control (claims, refusals, the data plane's address); the KV bytes go
// over the UCX data plane (ucx_worker.h, when both sides have `ucx` on), else the TCP
// data plane (tcp_wire.h), or over gRPC when either side has it off.
//
//   GrpcTransceiverOptions options;
//   options.name = "gen0 rank 2";
//   options.descriptor = DescribeKv(kv, "tiny-moe@<revision>");
//   options.copiers = CopiersOf(kv);
//   ASSIGN_OR_RETURN(auto transceiver, GrpcTransceiver::Create(options, clock));
//   // advertise transceiver->address() as this rank's KV transfer address
//
// Times: lease expiries and receive deadlines are on the injected clock. A lease is
// checked when Poll runs (and when a pull arrives); a receive deadline becomes the gRPC
// deadline of its pull, measured from StartReceive.
//
// Thread safety: the Transceiver methods are called from one thread (the executor's)
// and never block on the network; the object is otherwise thread-compatible. Its own
// threads: gRPC's server threads serving pulls, and `max_concurrent_receives` receive
// threads. Destruction stops both (a pull still running is cancelled).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_GRPC_TRANSCEIVER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_GRPC_TRANSCEIVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "runtime/transfer/event_queue.h"
#include "runtime/transfer/kv_descriptor.h"
#include "runtime/transfer/kv_transfer_server.h"
#include "runtime/transfer/receive_workers.h"
#include "runtime/transfer/send_claims.h"
#include "runtime/transfer/tcp_data_server.h"
#include "runtime/transfer/transceiver.h"
#include "runtime/transfer/transfer_hooks.h"

namespace lockstep::transfer {

struct GrpcTransceiverOptions {
  // Names this rank in messages to and from peers (e.g. "gen0 rank 2").
  std::string name;
  // What the local KV means and how to reach it; the copiers must outlive the
  // transceiver.
  KvDescriptor descriptor;
  KvCopiers copiers;
  // The service: listen address (127.0.0.1:0 by default), chunk size, concurrent pulls.
  KvTransferServerOptions server;
  // Receives pulled at once (threads); more wait in order.
  int max_concurrent_receives = 4;
  // Pull over a context rank's TCP data plane when it has one (served when
  // server.tcp_data_plane); otherwise, or when false, over gRPC.
  bool pull_over_tcp = true;
  // Serve and pull over a UCX data plane too (docs/transfer-ucx.md): a pull goes over
  // UCX where the context rank has it, else as above. UCX's own transport choice comes
  // from the environment (UCX_TLS, UCX_NET_DEVICES).
  bool ucx = false;
  // Test hooks; empty in production.
  TransferHooks hooks;
  UcxWorkerHooks ucx_hooks;

  absl::Status Validate() const;
};

class GrpcTransceiver : public Transceiver {
 public:
  // Starts the service. `clock` (the executor's) must outlive the transceiver.
  static absl::StatusOr<std::unique_ptr<GrpcTransceiver>> Create(GrpcTransceiverOptions options,
                                                                 Clock* clock);
  ~GrpcTransceiver() override;
  GrpcTransceiver(const GrpcTransceiver&) = delete;
  GrpcTransceiver& operator=(const GrpcTransceiver&) = delete;

  // InvalidArgument when the blocks do not fit the local pools (kv_descriptor.h
  // CheckBlockRefs); AlreadyExists when the id already has a claim.
  absl::Status StartSend(const SendSpec& spec) override;
  // As StartSend, plus InvalidArgument without a source address; AlreadyExists when
  // the id is already receiving.
  absl::Status StartReceive(const ReceiveSpec& spec) override;
  std::vector<TransferEvent> Poll() override;
  void Cancel(RequestId id) override;
  int64_t InFlight() const override { return in_flight_; }

  // "host:port" of this rank's KV transfer service, for peers to pull from.
  const std::string& address() const { return server_->address(); }
  // "host:port" of its TCP data plane; empty without one.
  std::string data_plane_address() const { return server_->tcp_address(); }
  // Its TCP data plane (stats for tests); null without one.
  const TcpDataServer* data_plane() const { return server_->tcp_data_server(); }
  // Its UCX data plane (stats for tests); null without one.
  const UcxDataServer* ucx_data_plane() const { return server_->ucx_data_server(); }

  // Receives pulled over a peer's TCP data plane, and over gRPC.
  int64_t pulls_over_tcp() const { return receivers_->pulls_over_tcp(); }
  int64_t pulls_over_grpc() const { return receivers_->pulls_over_grpc(); }
  // Of those over gRPC, the ones a peer's data plane refused (receive_workers.h).
  int64_t pulls_fallen_back() const { return receivers_->pulls_fallen_back(); }
  // Receives pulled over UCX, and those that fell back from UCX to the others.
  int64_t pulls_over_ucx() const { return receivers_->pulls_over_ucx(); }
  int64_t ucx_fallbacks() const { return receivers_->ucx_fallbacks(); }

  // Blocks until an ended transfer waits to be polled, or `timeout` passes; true when
  // one waits. For callers with nothing else to do (tests, benchmarks); lease expiry is
  // only noticed by Poll.
  bool WaitForEvent(absl::Duration timeout) const { return events_->WaitNonEmpty(timeout); }

 private:
  GrpcTransceiver(GrpcTransceiverOptions options, Clock* clock);

  const GrpcTransceiverOptions options_;
  Clock* const clock_;
  const std::shared_ptr<EventQueue> events_;
  const std::shared_ptr<SendClaims> claims_;
  std::unique_ptr<ReceiveWorkers> receivers_;
  std::unique_ptr<KvTransferServer> server_;
  int64_t in_flight_ = 0;  // started, not yet polled
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_GRPC_TRANSCEIVER_H_
