#include "runtime/worker/worker_service.h"

#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "grpcpp/server_context.h"
#include "kvcache/kv_manager.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/intake.h"
#include "runtime/worker/request_streams.h"

namespace lockstep::worker {
namespace {

// Generate's request and cancel deadlines are on the injected clock; its reads wait in
// real time. With a clock a day ahead of real time, a read that waited until a clock
// deadline would block for a day: the handler must still time out as the injected clock
// moves.
TEST(WorkerServiceTest, GenerateTimesOutOnTheInjectedClockWithRealTimeReads) {
  FakeClock clock(absl::Now() + absl::Hours(24));
  auto group = comm::MakeInProcessGroup(1);
  engine::FakeEngineOptions eo;
  eo.threaded = false;
  engine::FakeEngine engine(eo);
  exec::ExecutorConfig config;
  config.kv.target.layout = {1, 1, 1, 16};
  config.kv.target.num_blocks = 8;
  config.kv.dummy_reserved_tokens = 1;
  RequestStreams streams;
  exec::Executor::Deps deps;
  deps.comm = group[0].get();
  deps.engine = &engine;
  absl::StatusOr<std::unique_ptr<kv::KvManager>> kv = kv::KvManager::Create(config.kv);
  ASSERT_TRUE(kv.ok()) << kv.status();
  deps.kv = *std::move(kv);
  deps.clock = &clock;
  deps.sink = &streams;
  absl::StatusOr<std::unique_ptr<exec::Executor>> executor =
      exec::Executor::Create(config, std::move(deps));
  ASSERT_TRUE(executor.ok()) << executor.status();

  WorkerServiceOptions options;
  options.instance = "gen0";
  options.request_timeout = absl::ZeroDuration();  // cancel at once, then wait 5 s
  options.clock = &clock;
  options.executor = executor->get();
  options.streams = &streams;
  options.health = [] { return HealthView(); };
  WorkerServiceImpl service(std::move(options));

  v1::GenerateRequest request;
  request.set_request_id(7);
  request.add_prompt_token_ids(1);
  grpc::ServerContext context;
  grpc::Status status;
  absl::Notification done;
  // No response ever arrives (the executor never steps), so the writer is never used.
  std::thread handler([&] {
    status = service.Generate(&context, &request, /*writer=*/nullptr);
    done.Notify();
  });
  // Move the injected clock past the 5 s cancel grace, a second per 50 ms of real time.
  for (int i = 0; i < 200 && !done.WaitForNotificationWithTimeout(absl::Milliseconds(50));
       ++i) {
    clock.Advance(absl::Seconds(1));
  }
  if (!done.HasBeenNotified()) {
    ADD_FAILURE() << "Generate did not return as the injected clock passed its deadline";
    exec::Response last;  // unblock the handler: a final response ends its stream
    last.id = RequestId(7);
    last.finished = true;
    streams.OnResponses({last});
  }
  handler.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();

  exec::IntakeBatch batch;
  (*executor)->inbox().TakeAll(&batch);
  ASSERT_EQ(batch.requests.size(), 1u);
  EXPECT_EQ(batch.requests[0].id, RequestId(7));
  ASSERT_EQ(batch.cancels.size(), 1u);  // the timed-out request was cancelled in the instance
  EXPECT_EQ(batch.cancels[0], RequestId(7));
}

}  // namespace
}  // namespace lockstep::worker
