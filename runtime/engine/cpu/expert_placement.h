// The CPU engine's expert-parallel load balancing settings (docs/eplb.md): a static
// expert placement given as text (runtime/eplb/placement.h), and the expert-load
// measurement with its dump file.
//
// Thread-compatible functions; the dump callback runs on the engine thread.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_PLACEMENT_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_PLACEMENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::engine {

// The layout of placement `text` for `config` on `world_size` ranks; empty text: the
// contiguous sharding (an empty layout). Errors name the line and the problem, and a
// placement of a model without routed experts is refused.
absl::StatusOr<ExpertLayout> ExpertLayoutFromText(const std::string& text,
                                                  const ModelConfig& config, int world_size);

// ExpertLayoutFromText of the file at `path`; empty path: the contiguous sharding.
// Errors name the file.
absl::StatusOr<ExpertLayout> LoadExpertLayout(const std::string& path, const ModelConfig& config,
                                              int world_size);

// An ExpertLoad for the target model with windows of `window` forwards (> 0). With a
// `dump_path`, rank 0 rewrites that file with each window's snapshot (its text form);
// a failed write is logged and measuring goes on. With a `board` (not owned; it must
// outlive the ExpertLoad), every window's snapshot is also published there.
std::unique_ptr<ExpertLoad> MakeExpertLoad(const ModelConfig& config, int window,
                                           comm::Communicator* comm, int rank,
                                           absl::Duration timeout, const std::string& dump_path,
                                           ExpertLoadBoard* board = nullptr);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_PLACEMENT_H_
