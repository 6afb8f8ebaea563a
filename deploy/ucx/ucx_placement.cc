#include "deploy/ucx/ucx_placement.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace lockstep::deploy {
namespace {

// UCX_TLS names (UCX 1.13's transports and aliases) whose traffic stays on one node.
bool WithinANode(absl::string_view tl) {
  for (absl::string_view local : {"shm", "sm", "cma", "posix", "sysv", "xpmem", "knem", "self"}) {
    if (tl == local) return true;
  }
  return false;
}

// UCX_TLS names that need an RDMA device (InfiniBand or RoCE verbs).
bool NeedsRdma(absl::string_view tl) {
  for (absl::string_view prefix : {"rc", "dc", "ud", "ib"}) {
    if (absl::StartsWith(tl, prefix)) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> CheckUcxPlacement(const config::DeploymentConfig& config,
                                           const UcxPlacement& placement) {
  std::vector<std::string> errors;
  if (!config::UsesUcx(config)) return errors;
  for (const auto& [name, value] : config.placement.env) {
    const std::string field = absl::StrCat("placement.env.", name);
    const absl::string_view trimmed = absl::StripAsciiWhitespace(value);
    if (name == "UCX_NET_DEVICES" && trimmed.empty()) {
      errors.push_back(absl::StrCat(field, ": is empty (leave it out to let UCX choose, or "
                                           "name the devices, e.g. mlx5_0:1)"));
    }
    if (name != "UCX_TLS") continue;
    if (trimmed.empty()) {
      errors.push_back(absl::StrCat(field, ": is empty (leave it out to let UCX choose)"));
      continue;
    }
    if (trimmed.front() == '^') continue;  // an exclusion list: UCX picks from the rest
    std::vector<std::string> local;
    std::vector<std::string> rdma;
    bool between_nodes = false;
    for (absl::string_view tl : absl::StrSplit(trimmed, ',', absl::SkipWhitespace())) {
      const std::string name_lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(tl));
      if (name_lower == "all") {
        between_nodes = true;
      } else if (WithinANode(name_lower)) {
        local.push_back(name_lower);
      } else {
        between_nodes = true;  // tcp, the RDMA transports, and names UCX knows that we don't
        if (NeedsRdma(name_lower)) rdma.push_back(name_lower);
      }
    }
    if (placement.multi_node && !between_nodes) {
      errors.push_back(absl::StrCat(
          field, ": '", value, "' names only transports within a node (",
          absl::StrJoin(local, ", "),
          "), but the ranks run on several nodes: every KV transfer between nodes would "
          "fail; add tcp, or rc/dc with RDMA devices (docs/transfer-ucx.md)"));
    }
    if (placement.devices_from_rdma_resources && !rdma.empty() &&
        config.placement.rdma_resources.empty()) {
      errors.push_back(absl::StrCat(
          field, ": '", value, "' names RDMA transports (", absl::StrJoin(rdma, ", "),
          "), but placement.rdma_resources gives the pods no RDMA device (e.g. rdma/ib: 1 "
          "from the RDMA device plugin)"));
    }
  }
  return errors;
}

}  // namespace lockstep::deploy
