#include "runtime/router/testing/migration_fixture.h"

#include "common/testing/poll_until.h"
#include "nlohmann/json.hpp"
#include "runtime/config/role_wire.h"

namespace lockstep::router::testing {

using config::InstanceRole;

std::string CompletionBody(const std::string& prompt, int max_tokens, bool stream) {
  return nlohmann::json{
      {"model", kModel}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", stream}}
      .dump();
}

std::vector<int32_t> Ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

void MigrationFixture::Start(const std::vector<std::pair<std::string, InstanceRole>>& instances,
                             const Setup& setup) {
  config::DeploymentConfig config = TestConfig(instances);
  config.router.migration_limit = setup.migration_limit;
  config.router.max_queued_requests = setup.max_queued_requests;
  config.router.request_timeout_s = setup.request_timeout_s;
  config.router.heartbeat_timeout_ms = setup.heartbeat_timeout_ms;
  absl::StatusOr<std::unique_ptr<RouterDaemon>> router =
      StartRouter(config, setup.fake_clock ? &fake_clock_ : nullptr);
  ASSERT_TRUE(router.ok()) << router.status();
  router_ = *std::move(router);
  http_ = std::make_unique<HttpClient>(router_->http_address());
  for (const auto& [name, role] : instances) {
    absl::StatusOr<std::unique_ptr<FakeWorker>> worker =
        StartWorker(*router_, name, config::RoleToWire(role));
    ASSERT_TRUE(worker.ok()) << worker.status();
    workers_.push_back(*std::move(worker));
  }
}

void MigrationFixture::TearDown() {
  if (router_ != nullptr) router_->Shutdown();
  for (auto& stream : streams_) {
    if (stream->thread.joinable()) stream->thread.join();
  }
}

FakeWorker& MigrationFixture::Worker(const std::string& name) {
  for (auto& w : workers_) {
    if (w->name() == name) return *w;
  }
  ADD_FAILURE() << "no worker " << name;
  return *workers_.front();
}

FakeWorker* MigrationFixture::Busy(const std::vector<std::string>& names) {
  FakeWorker* busy = nullptr;
  lockstep::testing::PollUntil([&] {
    for (const std::string& name : names) {
      if (!Worker(name).requests().empty()) busy = &Worker(name);
    }
    return busy != nullptr;
  });
  return busy;
}

FakeWorker& MigrationFixture::Other(const FakeWorker* one, const std::string& a,
                                    const std::string& b) {
  return &Worker(a) == one ? Worker(b) : Worker(a);
}

std::pair<FakeWorker*, FakeWorker*> MigrationFixture::StallOneOfTwo(const std::string& body) {
  for (auto& worker : workers_) worker->SetStallAfter(3);
  StartStream(body);
  FakeWorker* serving = Busy({"agg0", "agg1"});
  if (serving == nullptr || !serving->AwaitStalled(1, absl::Seconds(10))) {
    ADD_FAILURE() << "no instance received and stalled the request";
    return {nullptr, nullptr};
  }
  FakeWorker& other = Other(serving, "agg0", "agg1");
  other.SetStallAfter(-1);
  return {serving, &other};
}

int MigrationFixture::StartStream(const std::string& body) {
  streams_.push_back(std::make_unique<Stream>());
  Stream* stream = streams_.back().get();
  const std::string address = router_->http_address();
  stream->thread = std::thread([stream, address, body] {
    stream->result = HttpClient(address).PostStream("/v1/completions", body);
  });
  return static_cast<int>(streams_.size()) - 1;
}

HttpResult& MigrationFixture::StreamResult(int i) {
  Stream& stream = *streams_.at(static_cast<size_t>(i));
  if (stream.thread.joinable()) stream.thread.join();
  return stream.result;
}

double MigrationFixture::Migrations() {
  double n = 0;
  for (const char* reason :
       {"stream_broken", "instance_unhealthy", "worker_error", "kv_pull_failed"}) {
    n += router_->metrics().MigrationCount(reason);
  }
  return n;
}

}  // namespace lockstep::router::testing
