#include "runtime/transfer/raw_pull.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/method_handler.h"

namespace lockstep::transfer {

const std::string& PullMethodName() {
  static const std::string* const name = new std::string(
      absl::StrCat("/", lockstep::v1::KvTransferService::service_full_name(), "/Pull"));
  return *name;
}

namespace {

// gRPC keeps the method name's pointer.
const std::string& DataPlaneMethodName() {
  static const std::string* const name = new std::string(
      absl::StrCat("/", lockstep::v1::KvTransferService::service_full_name(), "/DataPlane"));
  return *name;
}

}  // namespace

RawPullService::RawPullService(Handler handler) : handler_(std::move(handler)) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      PullMethodName().c_str(), grpc::internal::RpcMethod::SERVER_STREAMING,
      new grpc::internal::ServerStreamingHandler<RawPullService, lockstep::v1::PullRequest,
                                                 grpc::ByteBuffer>(
          [](RawPullService* service, grpc::ServerContext* context,
             const lockstep::v1::PullRequest* request,
             grpc::ServerWriter<grpc::ByteBuffer>* writer) {
            return service->Pull(context, request, writer);
          },
          this)));
  AddMethod(new grpc::internal::RpcServiceMethod(
      DataPlaneMethodName().c_str(), grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<RawPullService, lockstep::v1::DataPlaneRequest,
                                           lockstep::v1::DataPlaneInfo>(
          [](RawPullService* service, grpc::ServerContext* /*context*/,
             const lockstep::v1::DataPlaneRequest* /*request*/,
             lockstep::v1::DataPlaneInfo* reply) {
            reply->set_tcp_address(service->tcp_address_);
            return grpc::Status::OK;
          },
          this)));
}

grpc::Status RawPullService::Pull(grpc::ServerContext* context,
                                  const lockstep::v1::PullRequest* request,
                                  grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  return handler_(context, *request, writer);
}

RawPullStub::RawPullStub(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      method_(PullMethodName().c_str(), grpc::internal::RpcMethod::SERVER_STREAMING, channel_),
      stub_(lockstep::v1::KvTransferService::NewStub(channel_)) {}

absl::StatusOr<std::string> RawPullStub::DataPlaneAddress(absl::Time deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  lockstep::v1::DataPlaneInfo reply;
  const grpc::Status status = stub_->DataPlane(&context, lockstep::v1::DataPlaneRequest(), &reply);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return std::string();
  if (!status.ok()) return FromGrpcStatus(status);
  return reply.tcp_address();
}

std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> RawPullStub::Pull(
    grpc::ClientContext* context, const lockstep::v1::PullRequest& request) {
  return std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>>(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), method_,
                                                                    context, request));
}

}  // namespace lockstep::transfer
