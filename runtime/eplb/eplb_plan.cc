// Offline expert placement: reads an expert-load dump (runtime/engine/cpu/expert_load.h
// text) and writes a placement (runtime/eplb/placement.h text) to stdout.
//
//   eplb_plan LOADS_FILE RANKS [REDUNDANT_PER_RANK=0] [NODES=1] [GROUPS=0] > placement.txt
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "runtime/eplb/placement.h"
#include "runtime/eplb/plan.h"

int main(int argc, char** argv) {
  using namespace lockstep::eplb;  // NOLINT: a tool's main
  if (argc < 3 || argc > 6) {
    std::fprintf(stderr, "usage: %s LOADS_FILE RANKS [REDUNDANT_PER_RANK] [NODES] [GROUPS]\n",
                 argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  PlanOptions options;
  int* const fields[] = {&options.num_ranks, &options.redundant_per_rank, &options.num_nodes,
                         &options.num_groups};
  for (int i = 2; i < argc; ++i) {
    if (!absl::SimpleAtoi(argv[i], fields[i - 2])) {
      std::fprintf(stderr, "not a number: %s\n", argv[i]);
      return 2;
    }
  }
  const auto loads = ParseLoads(text.str());
  if (!loads.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[1], loads.status().ToString().c_str());
    return 1;
  }
  const auto plan = Plan(*loads, options);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
    return 1;
  }
  for (size_t l = 0; l < loads->size(); ++l) {
    std::fprintf(stdout, "# layer %zu: max/mean %.3f (contiguous: %.3f)\n", l,
                 Imbalance(plan->layers[l], (*loads)[l]),
                 Imbalance(ContiguousPlacement(plan->num_experts, plan->num_ranks, 1).layers[0],
                           (*loads)[l]));
  }
  std::fputs(Format(*plan).c_str(), stdout);
  return 0;
}
