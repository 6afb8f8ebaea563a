#include "runtime/security/grpc_credentials.h"

#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "grpc/grpc.h"
#include "grpc/grpc_security.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"
#include "runtime/security/token_check.h"

namespace lockstep::security {
namespace {

std::string_view View(const grpc_slice& slice) {
  return std::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                          GRPC_SLICE_LENGTH(slice));
}

// Logs the first rejection of each (method, reason): the processor is not told the
// caller's address (token_checked_service.h is).
void LogRejection(std::string_view method, std::string_view reason, std::string_view agent) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* logged = new absl::flat_hash_set<std::string>();
  const std::string key = std::string(method) + " " + std::string(reason);
  {
    absl::MutexLock lock(&mu);
    if (logged->size() >= 1024 || !logged->insert(key).second) return;
  }
  LOCKSTEP_LOG_WARN("security", "rejected {}: {} (client {}); further such calls are not logged",
                    method, reason, agent);
}

// The server side: gRPC core calls Process for every call before its handler, on
// plaintext and TLS connections alike. `state` is a TokenCheck.
void ProcessToken(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                  size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
  const TokenCheck& check = *static_cast<const TokenCheck*>(state);
  std::string_view method = "?";
  std::string_view agent = "?";
  const grpc_metadata* presented = nullptr;
  for (size_t i = 0; i < num_md; ++i) {
    const std::string_view key = View(md[i].key);
    if (key == kClusterTokenMetadataKey) {
      presented = &md[i];
    } else if (key == ":path") {
      method = View(md[i].value);
    } else if (key == "user-agent") {
      agent = View(md[i].value);
    }
  }
  const char* refusal = check.Refusal(
      method, presented == nullptr ? std::nullopt
                                   : std::optional<std::string_view>(View(presented->value)));
  if (refusal == nullptr) {
    // The token is consumed: handlers never see it.
    done(user_data, presented, presented == nullptr ? 0 : 1, nullptr, 0, GRPC_STATUS_OK, nullptr);
    return;
  }
  LogRejection(method, refusal, agent);
  done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED, refusal);
}

void DestroyTokenCheck(void* state) { delete static_cast<TokenCheck*>(state); }

// grpc::InsecureServerCredentials() refuses an auth-metadata processor (it asserts), so
// these credentials build the core ones themselves: plaintext or TLS, plus the token
// processor.
class ClusterServerCredentials final : public grpc::ServerCredentials {
 public:
  // `check_token`: install the token processor (when the security has a token).
  ClusterServerCredentials(ClusterSecurity security, std::vector<std::string> open_methods,
                           bool check_token)
      : security_(std::move(security)),
        open_methods_(std::move(open_methods)),
        check_token_(check_token) {}

  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {
    LOCKSTEP_LOG_ERROR("security", "SetAuthMetadataProcessor is not supported; ignored");
  }

 private:
  int AddPortToServer(const std::string& address, grpc_server* server) override {
    grpc_server_credentials* creds = nullptr;
    if (security_.tls()) {
      grpc_ssl_pem_key_cert_pair pair{security_.tls_key_pem.c_str(),
                                      security_.tls_cert_pem.c_str()};
      creds = grpc_ssl_server_credentials_create_ex(security_.tls_ca_pem.c_str(), &pair, 1,
                                                    GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
                                                    nullptr);
    } else {
      creds = grpc_insecure_server_credentials_create();
    }
    if (check_token_ && !security_.cluster_token.empty()) {
      grpc_server_credentials_set_auth_metadata_processor(
          creds,
          grpc_auth_metadata_processor{&ProcessToken, &DestroyTokenCheck,
                                       new TokenCheck(security_.cluster_token, open_methods_)});
    }
    const int port = grpc_server_add_http2_port(server, address.c_str(), creds);
    grpc_server_credentials_release(creds);
    return port;
  }

  const ClusterSecurity security_;
  const std::vector<std::string> open_methods_;
  const bool check_token_;
};

// The client side: adds the token to every call's initial metadata.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kClusterTokenMetadataKey, *token_);
    }
    methods->Proceed();
  }

 private:
  const std::string* token_;  // owned by the factory, which the channel keeps
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new TokenInterceptor(&token_);
  }

 private:
  const std::string token_;
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const ClusterSecurity& security,
                                                           std::vector<std::string> open_methods) {
  return std::make_shared<ClusterServerCredentials>(security, std::move(open_methods),
                                                    /*check_token=*/true);
}

std::shared_ptr<grpc::ServerCredentials> ServerTransportCredentials(
    const ClusterSecurity& security) {
  return std::make_shared<ClusterServerCredentials>(security, std::vector<std::string>(),
                                                    /*check_token=*/false);
}

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             const ClusterSecurity& security,
                                             grpc::ChannelArguments args) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (security.tls()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = security.tls_ca_pem;
    creds = grpc::SslCredentials(options);
    if (!security.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(security.tls_server_name);
    }
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!security.cluster_token.empty()) {
    interceptors.push_back(std::make_unique<TokenInterceptorFactory>(security.cluster_token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args,
                                                                 std::move(interceptors));
}

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             grpc::ChannelArguments args) {
  return CreateChannel(target, ProcessClusterSecurity(), std::move(args));
}

}  // namespace lockstep::security
