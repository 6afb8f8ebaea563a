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
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/method_handler.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
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

std::optional<std::string_view> PresentedToken(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kClusterTokenMetadataKey); it != metadata.end()) {
    return std::string_view(it->second.data(), it->second.size());
  }
  return std::nullopt;
}

// A streaming reactor that ends its call with `status` and nothing else.
class RefusingWriteReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RefusingWriteReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// The refusal of a callback method's call: a callback handler of the same kind whose
// reactor only finishes with UNAUTHENTICATED (the sync ErrorMethodHandler would wait on
// the call's completion queue, which callback calls do not have). Made per refused
// call: gRPC's callback handlers use themselves only within RunHandler.
std::unique_ptr<MethodHandler> CallbackRefusal(RpcMethod::RpcType type, const char* refusal) {
  grpc::Status status(grpc::StatusCode::UNAUTHENTICATED, refusal);
  if (type == RpcMethod::SERVER_STREAMING) {
    return std::make_unique<
        grpc::internal::CallbackServerStreamingHandler<grpc::ByteBuffer, grpc::ByteBuffer>>(
        [status](grpc::CallbackServerContext*, const grpc::ByteBuffer*) {
          return new RefusingWriteReactor(status);
        });
  }
  return std::make_unique<grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>>(
      [status](grpc::CallbackServerContext* context, const grpc::ByteBuffer*, grpc::ByteBuffer*) {
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        reactor->Finish(status);
        return reactor;
      });
}

// Runs the check, then `inner` (the wrapped service's handler) or the refusal. The
// request's bytes are kept as they arrived (Deserialize returns them) and parsed by
// `inner` only once the call is let through. `callback` says whether `inner` is a
// callback-API handler (then the refusal is one too).
class TokenCheckHandler final : public MethodHandler {
 public:
  TokenCheckHandler(MethodHandler* inner, RpcMethod::RpcType type, bool callback,
                    const std::string* method, std::shared_ptr<const TokenCheck> check)
      : inner_(inner), type_(type), callback_(callback), method_(method), check_(std::move(check)) {}

  void* Deserialize(grpc_call* /*call*/, grpc_byte_buffer* request, grpc::Status* /*status*/,
                    void** /*handler_data*/) override {
    return request;  // owned by this call's RunHandler from here on
  }

  void RunHandler(const HandlerParameter& param) override {
    auto* payload = static_cast<grpc_byte_buffer*>(param.request);
    if (const char* refusal = check_->Refusal(*method_, PresentedToken(*param.server_context))) {
      RefusalLog().Note(param.server_context->peer(),
                        absl::StrCat("a call to ", *method_, ": ", refusal));
      if (callback_) {
        // The refusing handler takes the (unparsed) bytes as a ByteBuffer and requests
        // the next call when this one is done, as every callback handler must.
        RunWith(*CallbackRefusal(type_, refusal), param, payload);
        return;
      }
      if (payload != nullptr) grpc_byte_buffer_destroy(payload);
      Refuse(param, refusal);
      return;
    }
    RunWith(*inner_, param, payload);
  }

 private:
  void RunWith(MethodHandler& handler, const HandlerParameter& param, grpc_byte_buffer* payload) {
    grpc::Status status;
    void* request = nullptr;
    void* handler_data = nullptr;
    if (HasRequestPayload(type_)) {
      request = handler.Deserialize(param.call->call(), payload, &status, &handler_data);
    }
    handler.RunHandler(HandlerParameter(param.call, param.server_context, request, status,
                                        handler_data, param.call_requester));
  }

  // Ends a synchronous call with UNAUTHENTICATED, the way gRPC ends a call it cannot
  // serve.
  static void Refuse(const HandlerParameter& param, const char* refusal) {
    grpc::internal::ErrorMethodHandler<grpc::StatusCode::UNAUTHENTICATED>(refusal).RunHandler(
        param);
  }

  MethodHandler* const inner_;  // owned by the wrapped service
  const RpcMethod::RpcType type_;
  const bool callback_;
  const std::string* const method_;  // owned by the wrapper service
  const std::shared_ptr<const TokenCheck> check_;
};

class TokenCheckedService final : public grpc::Service {
 public:
  TokenCheckedService(grpc::Service& service, const google::protobuf::ServiceDescriptor& descriptor,
                      std::shared_ptr<const TokenCheck> check) {
    // gRPC tells only per service whether methods are callback ones: a service is
    // either all synchronous or all callback.
    const bool callback = service.has_callback_methods();
    LOCKSTEP_CHECK(!callback || !service.has_synchronous_methods())
        << descriptor.full_name() << " mixes synchronous and callback methods";
    for (int i = 0; i < descriptor.method_count(); ++i) {
      const google::protobuf::MethodDescriptor& method = *descriptor.method(i);
      LOCKSTEP_CHECK(!method.client_streaming())
          << method.full_name() << ": client streaming is not supported";
      const RpcMethod::RpcType type =
          method.server_streaming() ? RpcMethod::SERVER_STREAMING : RpcMethod::NORMAL_RPC;
      MethodHandler* inner = HandlerAccess::Get(service, i);
      LOCKSTEP_CHECK(inner != nullptr)
          << method.full_name() << " has no synchronous or callback handler";
      // gRPC keeps the name's pointer: the strings live as long as the wrapper.
      names_.push_back(std::make_unique<const std::string>(
          absl::StrCat("/", descriptor.full_name(), "/", method.name())));
      auto* wrapped = new grpc::internal::RpcServiceMethod(
          names_.back()->c_str(), type,
          new TokenCheckHandler(inner, type, callback, names_.back().get(), check));
      if (callback) wrapped->SetServerApiType(grpc::internal::RpcServiceMethod::ApiType::CALL_BACK);
      AddMethod(wrapped);
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
