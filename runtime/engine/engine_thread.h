// A ModelEngine (model_engine.h) that runs each launched batch on its own thread, in
// launch order, through an engine's parts (its models, drafter and batch runner), so
// the executor's Launch returns at once and Collect waits with its timeout. The CPU
// engine and a device engine share it: they differ only in their parts.
//
//   auto parts = std::make_unique<MyParts>(...);   // MyParts : EngineParts
//   std::unique_ptr<ModelEngine> engine = std::make_unique<EngineThread>(info, std::move(parts));
//
// Thread safety: Launch and Collect from the executor thread; the parts are used by the
// engine thread only, and destroyed after it stops (the destructor waits until every
// launched batch has run).
#ifndef LOCKSTEP_RUNTIME_ENGINE_ENGINE_THREAD_H_
#define LOCKSTEP_RUNTIME_ENGINE_ENGINE_THREAD_H_

#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "runtime/engine/model_engine.h"

namespace lockstep::engine {

// What an engine runs a batch with (owned by EngineThread, used by its thread only).
class EngineParts {
 public:
  virtual ~EngineParts() = default;
  virtual absl::StatusOr<BatchResult> Run(const Batch& batch) = 0;
};

class EngineThread final : public ModelEngine {
 public:
  EngineThread(EngineInfo info, std::unique_ptr<EngineParts> parts);
  ~EngineThread() override;
  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  EngineInfo info() const override { return info_; }
  void Launch(Batch batch) override;
  absl::StatusOr<BatchResult> Collect(StepId step, absl::Duration timeout) override;

 private:
  // A finished batch (a StatusOr split in two: gcc 12 warns on moving StatusOr here).
  struct Outcome {
    absl::Status status;
    BatchResult result;
  };

  void Loop();

  const EngineInfo info_;
  const std::unique_ptr<EngineParts> parts_;  // used by thread_ only

  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<StepId> launched_ ABSL_GUARDED_BY(mu_);  // launched, not collected
  std::deque<Outcome> results_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_ENGINE_THREAD_H_
