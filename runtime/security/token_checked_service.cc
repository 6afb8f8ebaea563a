#include "runtime/security/token_checked_service.h"

#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "grpc/byte_buffer.h"
#include "grpcpp/impl/call.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/method_handler.h"
#include "runtime/security/peer_log.h"
#include "runtime/security/token_check.h"

namespace lockstep::security {
namespace {

using grpc::internal::MethodHandler;
using grpc::internal::RpcMethod;

// grpc::Service keeps its methods' handlers behind a protected accessor; this reaches
// it on another service object (forming a pointer to a protected member through a
// derived class is allowed, and calling through the pointer needs no access).
struct HandlerAccess : grpc::Service {
  static MethodHandler* Get(grpc::Service& service, int index) {
    return (service.*(&HandlerAccess::GetHandler))(index);
  }
};

PeerLog& RefusalLog() {
  static PeerLog* const log = new PeerLog("gRPC");
  return *log;
}

bool HasRequestPayload(RpcMethod::RpcType type) {
  return type == RpcMethod::NORMAL_RPC || type == RpcMethod::SERVER_STREAMING;
}

// Runs the check, then `inner` (the wrapped service's handler) or the refusal. The
// request's bytes are kept as they arrived (Deserialize returns them) and parsed by
// `inner` only once the call is let through.
class TokenCheckHandler final : public MethodHandler {
 public:
  TokenCheckHandler(MethodHandler* inner, RpcMethod::RpcType type, const std::string* method,
                    std::shared_ptr<const TokenCheck> check)
      : inner_(inner), type_(type), method_(method), check_(std::move(check)) {}

  void* Deserialize(grpc_call* /*call*/, grpc_byte_buffer* request, grpc::Status* /*status*/,
                    void** /*handler_data*/) override {
    return request;  // owned by this call's RunHandler from here on
  }

  void RunHandler(const HandlerParameter& param) override {
    auto* payload = static_cast<grpc_byte_buffer*>(param.request);
    std::optional<std::string_view> presented;
    const auto& metadata = param.server_context->client_metadata();
    if (auto it = metadata.find(kClusterTokenMetadataKey); it != metadata.end()) {
      presented = std::string_view(it->second.data(), it->second.size());
    }
    if (const char* refusal = check_->Refusal(*method_, presented)) {
      if (payload != nullptr) grpc_byte_buffer_destroy(payload);
      RefusalLog().Note(param.server_context->peer(),
                        absl::StrCat("a call to ", *method_, ": ", refusal));
      Refuse(param, refusal);
      return;
    }
    grpc::Status status;
    void* request = nullptr;
    void* handler_data = nullptr;
    if (HasRequestPayload(type_)) {
      request = inner_->Deserialize(param.call->call(), payload, &status, &handler_data);
    }
    inner_->RunHandler(HandlerParameter(param.call, param.server_context, request, status,
                                        handler_data, param.call_requester));
  }

 private:
  // Ends the call with UNAUTHENTICATED, the way gRPC ends a call it cannot serve.
  static void Refuse(const HandlerParameter& param, const char* refusal) {
    grpc::internal::ErrorMethodHandler<grpc::StatusCode::UNAUTHENTICATED>(refusal).RunHandler(
        param);
  }

  MethodHandler* const inner_;  // owned by the wrapped service
  const RpcMethod::RpcType type_;
  const std::string* const method_;  // owned by the wrapper service
  const std::shared_ptr<const TokenCheck> check_;
};

class TokenCheckedService final : public grpc::Service {
 public:
  TokenCheckedService(grpc::Service& service, const google::protobuf::ServiceDescriptor& descriptor,
                      std::shared_ptr<const TokenCheck> check) {
    for (int i = 0; i < descriptor.method_count(); ++i) {
      const google::protobuf::MethodDescriptor& method = *descriptor.method(i);
      LOCKSTEP_CHECK(!method.client_streaming())
          << method.full_name() << ": client streaming is not supported";
      const RpcMethod::RpcType type =
          method.server_streaming() ? RpcMethod::SERVER_STREAMING : RpcMethod::NORMAL_RPC;
      MethodHandler* inner = HandlerAccess::Get(service, i);
      LOCKSTEP_CHECK(inner != nullptr) << method.full_name() << " has no synchronous handler";
      // gRPC keeps the name's pointer: the strings live as long as the wrapper.
      names_.push_back(std::make_unique<const std::string>(
          absl::StrCat("/", descriptor.full_name(), "/", method.name())));
      AddMethod(new grpc::internal::RpcServiceMethod(
          names_.back()->c_str(), type,
          new TokenCheckHandler(inner, type, names_.back().get(), check)));
    }
  }

 private:
  std::vector<std::unique_ptr<const std::string>> names_;
};

}  // namespace

const google::protobuf::ServiceDescriptor& GeneratedServiceDescriptor(const char* full_name) {
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(full_name);
  LOCKSTEP_CHECK(descriptor != nullptr) << "no descriptor of service " << full_name;
  return *descriptor;
}

std::unique_ptr<grpc::Service> RequireClusterToken(
    grpc::Service* service, const google::protobuf::ServiceDescriptor& descriptor,
    const ClusterSecurity& security, std::vector<std::string> open_methods) {
  return std::make_unique<TokenCheckedService>(
      *service, descriptor,
      std::make_shared<const TokenCheck>(security.cluster_token, std::move(open_methods)));
}

}  // namespace lockstep::security
