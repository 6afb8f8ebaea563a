// Copying routed experts between the ranks of an expert-parallel group when a new
// placement is adopted (expert_rebalance.h): the experts a rank gains come from a rank
// that holds them under the current placement instead of the checkpoint. Every rank
// derives the same list of copies (who sends which expert to whom) from the two
// placements, encodes what it sends from its weights in use, and after one AllToAllBytes
// builds its new weights from the experts it keeps and the ones it received. The bytes
// are the packed matrices themselves, so a copied expert computes the same bits as the
// sender's.
//
// Pure functions over values; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_COPY_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_COPY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/eplb/placement.h"

namespace lockstep::engine {

// MoE weights per layer (null for a layer that is not MoE).
using LayerMoeWeights = std::vector<std::shared_ptr<const MoeWeights>>;

// One expert sent from rank `from` to rank `to` for `layer`.
struct ExpertCopy {
  int layer = 0;
  int expert = 0;
  int from = 0;
  int to = 0;

  bool operator==(const ExpertCopy& other) const {
    return layer == other.layer && expert == other.expert && from == other.from && to == other.to;
  }
};

// A copy for every slot of `next` whose rank does not hold that expert in `current`,
// on the layers where `moe_layer` is true. The sender is, among the expert's holders in
// `current`, the one with the fewest copies to send so far (ties: the lowest rank), so
// a replicated hot expert is not sent by one rank alone. Deterministic; ordered by
// layer, destination, expert. InvalidArgument when the placements do not match in
// shape or an expert has no holder in `current`.
absl::StatusOr<std::vector<ExpertCopy>> PlanExpertCopies(const eplb::Placement& current,
                                                         const eplb::Placement& next,
                                                         const std::vector<bool>& moe_layer);

// What `rank` sends: result[to] holds the experts of the copies from `rank` to `to`, in
// the copies' order, read from `weights` (this rank's weights in use). NotFound when a
// copy names an expert `weights` does not hold.
absl::StatusOr<std::vector<std::string>> EncodeExpertCopies(const std::vector<ExpertCopy>& copies,
                                                            int rank, int world_size,
                                                            const LayerMoeWeights& weights);

// Each encoded expert: this many header bytes, then its packed matrices' bytes.
inline constexpr int64_t kExpertCopyHeaderBytes = 7 * sizeof(int32_t);

// `rank`'s weights under `next` before the copies arrive: the experts it keeps copied
// from `weights`, an empty SwiGluWeights for each one it gains (the costly part of
// building the weights, done before the exchange).
std::vector<std::shared_ptr<MoeWeights>> KeptExperts(int rank, const eplb::Placement& next,
                                                     const LayerMoeWeights& weights);

// Decodes the experts copied to `rank` from received[from] into their empty places in
// `kept` (KeptExperts). DataLoss naming the sender when a peer's bytes do not hold
// exactly the experts the copies say (a failed, empty or truncated copy).
absl::Status FillCopiedExperts(const std::vector<ExpertCopy>& copies, int rank,
                               const std::vector<std::string>& received,
                               std::vector<std::shared_ptr<MoeWeights>>& kept);

// KeptExperts, then FillCopiedExperts.
absl::StatusOr<LayerMoeWeights> AssembleExperts(const std::vector<ExpertCopy>& copies, int rank,
                                                const eplb::Placement& next,
                                                const LayerMoeWeights& weights,
                                                const std::vector<std::string>& received);

// The index of `expert` in `moe.experts`, or -1 when `moe` does not hold it.
int HeldIndex(const MoeWeights& moe, int expert);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_EXPERT_COPY_H_
