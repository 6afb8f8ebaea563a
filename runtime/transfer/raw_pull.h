// KvTransferService.Pull with the stream's messages left as raw gRPC byte buffers
// (chunk_codec.h encodes and decodes them), so that KV bytes are not copied through
// protobuf messages. The request is the generated lockstep.v1.PullRequest; the method
// name and wire format are those of proto/kv_transfer.proto, so the generated stub and
// service interoperate with these.
//
// The gRPC C++ API offers raw (ByteBuffer) messages for synchronous streams only
// through the handler and reader templates that generated code itself uses
// (grpc::internal); this file is the one place that names them.
//
// Thread safety: RawPullService is immutable after construction (gRPC calls the handler
// on its threads); RawPullStub is thread-safe.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_RAW_PULL_H_
#define LOCKSTEP_RUNTIME_TRANSFER_RAW_PULL_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/rpc_method.h"
#include "proto/kv_transfer.grpc.pb.h"

namespace lockstep::transfer {

// "/lockstep.v1.KvTransferService/Pull".
const std::string& PullMethodName();

// The whole KvTransferService: Pull through `handler`, DataPlane answering
// `tcp_address` (empty: no TCP data plane).
class RawPullService : public grpc::Service {
 public:
  using Handler = std::function<grpc::Status(grpc::ServerContext*, const lockstep::v1::PullRequest&,
                                             grpc::ServerWriter<grpc::ByteBuffer>*)>;
  explicit RawPullService(Handler handler);

  // Before the server starts.
  void set_tcp_address(std::string address) { tcp_address_ = std::move(address); }

 private:
  grpc::Status Pull(grpc::ServerContext* context, const lockstep::v1::PullRequest* request,
                    grpc::ServerWriter<grpc::ByteBuffer>* writer);

  Handler handler_;
  std::string tcp_address_;
};

// The client side, one per channel (like a generated stub).
class RawPullStub {
 public:
  explicit RawPullStub(std::shared_ptr<grpc::Channel> channel);

  // Starts a Pull under `context`; read the chunks with Read() and end with Finish(), as
  // for any synchronous server stream.
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> Pull(
      grpc::ClientContext* context, const lockstep::v1::PullRequest& request);

  // The context rank's TCP data plane address ("" when it has none), asked by
  // `deadline`.
  absl::StatusOr<std::string> DataPlaneAddress(absl::Time deadline);

  // The channel to the context rank (shared with the UCX data plane's stub).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  grpc::internal::RpcMethod method_;
  std::unique_ptr<lockstep::v1::KvTransferService::Stub> stub_;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_RAW_PULL_H_
