#include "runtime/engine/cpu/expert_placement.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/eplb/placement.h"

namespace lockstep::engine {

absl::StatusOr<ExpertLayout> ExpertLayoutFromText(const std::string& text,
                                                  const ModelConfig& config, int world_size) {
  if (text.empty()) return ExpertLayout();
  if (!config.is_moe()) {
    return absl::InvalidArgumentError(
        "expert placement: the model has no routed experts to place");
  }
  absl::StatusOr<eplb::Placement> placement =
      eplb::Parse(text, config.num_experts, world_size, config.num_layers);
  if (!placement.ok()) return placement.status();
  ExpertLayout layout;
  for (eplb::LayerPlacement& layer : placement->layers) layout.push_back(std::move(layer.slots));
  return layout;
}

absl::StatusOr<ExpertLayout> LoadExpertLayout(const std::string& path, const ModelConfig& config,
                                              int world_size) {
  if (path.empty()) return ExpertLayout();
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<ExpertLayout> layout = ExpertLayoutFromText(*text, config, world_size);
  if (!layout.ok()) {
    return absl::Status(layout.status().code(),
                        absl::StrCat(path, ": ", layout.status().message()));
  }
  return layout;
}

std::unique_ptr<ExpertLoad> MakeExpertLoad(const ModelConfig& config, int window,
                                           comm::Communicator* comm, int rank,
                                           absl::Duration timeout, const std::string& dump_path,
                                           ExpertLoadBoard* board) {
  auto load = std::make_unique<ExpertLoad>(config.num_layers, config.num_experts, window, comm,
                                           timeout, "target");
  const std::string dump = rank == 0 ? dump_path : "";
  if (!dump.empty() || board != nullptr) {
    load->set_on_window([dump, board](const ExpertLoadSnapshot& snapshot) {
      if (board != nullptr) board->Publish(snapshot);
      if (dump.empty()) return;
      if (absl::Status s = WriteStringToFile(dump, snapshot.Format()); !s.ok()) {
        GetLogger("engine")->warn("expert load dump {}: {}", dump, s.ToString());
      }
    });
  }
  return load;
}

}  // namespace lockstep::engine
