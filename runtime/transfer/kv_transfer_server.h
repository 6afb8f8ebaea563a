// KvTransferService on a context rank: serves Pull for the requests held under
// transfer claims (send_claims.h), over gRPC and over the TCP data plane
// (tcp_data_server.h) alike. Each Pull checks the requester's KV descriptor and
// the request's shape, then streams the claim's target blocks and then its draft
// blocks (unless the requester has no draft pool) in table order, in chunks of at most
// `chunk_bytes`, with a CRC32C per block and a trailer with the counts. Each chunk's bytes are copied out of the blocks through
// the pool's copier (kvcache/block_copier.h; the pools may be device memory) into a
// host send buffer (send_buffers.h), checksummed there and sent from it; gRPC
// references the buffer, not the blocks, so the claim may end once the trailer is out.
//
// A mismatch, a refused or failed stream and an abort all end the claim (one kSend
// event, see send_claims.h); a Pull for no claim, or for a claim being pulled, does not.
//
// Thread safety: thread-safe. Pulls run on gRPC's server threads and the data plane's
// connection threads, at most
// `max_concurrent_pulls` at once (more wait up to `max_queue_wait` for a turn).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_KV_TRANSFER_SERVER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_KV_TRANSFER_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "runtime/transfer/chunk_sink.h"
#include "runtime/transfer/kv_descriptor.h"
#include "runtime/transfer/raw_pull.h"
#include "runtime/transfer/send_buffers.h"
#include "runtime/transfer/send_claims.h"
#include "runtime/transfer/tcp_data_server.h"
#include "runtime/transfer/transfer_hooks.h"
#include "runtime/transfer/ucx_data_server.h"
#include "runtime/transfer/ucx_worker.h"

namespace lockstep::transfer {

struct KvTransferServerOptions {
  // "host:port"; port 0 picks a free one (read it back with address()).
  std::string listen_address = "127.0.0.1:0";
  // Payload bytes per chunk, in [kMinChunkBytes, kMaxChunkBytes] (chunk_codec.h).
  size_t chunk_bytes = 512 << 10;
  // Pulls streamed at once; a further pull waits for a turn.
  int max_concurrent_pulls = 8;
  // How long a pull waits for a turn (also bounded by its deadline) before it is
  // refused with RESOURCE_EXHAUSTED (the claim stays).
  absl::Duration max_queue_wait = absl::Seconds(10);
  // Also serve pulls on a TCP data plane (tcp_data_server.h) at a free port of the
  // listen host, advertised through KvTransferService.DataPlane.
  bool tcp_data_plane = true;
  // Its connection bounds and handshake deadline.
  TcpDataServerOptions data_plane;
  // The UCX data plane's bounds (served when Start is given a UCX worker).
  UcxDataServerOptions ucx;

  absl::Status Validate() const;
};

class KvTransferServer {
 public:
  // Listens and serves. The copiers must stay valid until the server is destroyed. With
  // `ucx_worker`, also serves KvUcxService (ucx_data_server.h) on the same port.
  static absl::StatusOr<std::unique_ptr<KvTransferServer>> Start(
      const KvTransferServerOptions& options, KvDescriptor descriptor, KvCopiers copiers,
      std::shared_ptr<SendClaims> claims, TransferHooks hooks = {},
      std::shared_ptr<UcxWorker> ucx_worker = nullptr);
  ~KvTransferServer();  // Shutdown(1s) if not done
  KvTransferServer(const KvTransferServer&) = delete;
  KvTransferServer& operator=(const KvTransferServer&) = delete;

  // "host:port" with the port actually bound.
  const std::string& address() const { return address_; }
  // The TCP data plane's "host:port"; empty without one.
  std::string tcp_address() const { return tcp_ == nullptr ? "" : tcp_->address(); }
  // The TCP data plane; null without one.
  const TcpDataServer* tcp_data_server() const { return tcp_.get(); }
  // The UCX data plane; null without one.
  const UcxDataServer* ucx_data_server() const { return ucx_.get(); }

  // Aborts running pulls (their claims end with kUnavailable), refuses new ones, and
  // stops the server; calls still running after `grace` are cancelled. Blocks until
  // every handler has returned. Idempotent.
  void Shutdown(absl::Duration grace) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  KvTransferServer(const KvTransferServerOptions& options, KvDescriptor descriptor,
                   KvCopiers copiers, std::shared_ptr<SendClaims> claims, TransferHooks hooks);

  grpc::Status Serve(grpc::ServerContext* context, const lockstep::v1::PullRequest& request,
                     grpc::ServerWriter<grpc::ByteBuffer>* writer) ABSL_LOCKS_EXCLUDED(mu_);
  // One pull, from either transport: waits for a turn, begins the claim's pull (under
  // `context` when it came over gRPC), checks and streams it into `sink`.
  absl::Status ServePull(const lockstep::v1::PullRequest& request, absl::Time deadline,
                         grpc::ServerContext* context, ChunkSink& sink) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the requester's descriptor and allocation fit the claim.
  absl::Status CheckRequest(const lockstep::v1::PullRequest& request, const SendSpec& spec) const;
  // Streams the claim's blocks (its draft blocks only when `draft`) and the trailer;
  // the outcome of the pull.
  absl::Status Stream(const std::shared_ptr<ActivePull>& pull, bool draft,
                      ChunkSink& sink) const;
  // Waits for one of the `max_concurrent_pulls` turns until `deadline`.
  bool AcquireTurn(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseTurn() ABSL_LOCKS_EXCLUDED(mu_);

  const KvTransferServerOptions options_;
  const KvDescriptor descriptor_;
  const KvCopiers copiers_;
  mutable SendBuffers buffers_;
  const std::shared_ptr<SendClaims> claims_;
  const TransferHooks hooks_;
  RawPullService service_;
  std::unique_ptr<grpc::Service> checked_service_;  // service_ behind the cluster token
  std::unique_ptr<TcpDataServer> tcp_;
  std::unique_ptr<UcxDataServer> ucx_;
  std::unique_ptr<grpc::Service> checked_ucx_service_;  // ucx_ behind the cluster token
  std::unique_ptr<grpc::Server> server_;
  std::string address_;

  absl::Mutex mu_;
  int active_pulls_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_KV_TRANSFER_SERVER_H_
