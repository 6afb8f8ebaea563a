#include "runtime/transfer/raw_pull.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/method_handler.h"

namespace lockstep::transfer {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

const std::string& PullMethodName() {
  static const std::string* const name = new std::string(
      absl::StrCat("/", lockstep::v1::KvTransferService::service_full_name(), "/Pull"));
  return *name;
}

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
}

grpc::Status RawPullService::Pull(grpc::ServerContext* context,
                                  const lockstep::v1::PullRequest* request,
                                  grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  return handler_(context, *request, writer);
}

RawPullStub::RawPullStub(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      method_(PullMethodName().c_str(), grpc::internal::RpcMethod::SERVER_STREAMING, channel_) {}

std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> RawPullStub::Pull(
    grpc::ClientContext* context, const lockstep::v1::PullRequest& request) {
  return std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>>(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), method_,
                                                                    context, request));
}

}  // namespace lockstep::transfer
