// Teacher-forced comparison of two ForwardModels of the same model (the CPU transformer
// as the reference, a device model as the candidate): the same steps run on both, each
// on its own KV pool with the same block tables, and every returned logit row is
// compared. The steps: one forward prefilling every prompt (logits of each last row),
// then `decode_steps` forwards of one row per sequence whose token is the reference's
// greedy choice (so both see the reference's sequence), and one forward in which every
// sequence verifies three drafts (four rows with logits: the speculative shape).
//
// Reported per run: the worst relative L2 (||cand - ref|| / ||ref|| per row), and the
// greedy agreement under the margin rule, per sequence: the candidate's argmax must
// equal the reference's at every position of a sequence before the first position
// whose reference top-2 logit margin is not above the row's threshold (that position,
// where the greedy tokens may first diverge, is reported per sequence, and the
// sequence's later rows are not checked for argmax). The threshold is relative to the
// row's observed error: `margin_errors` times the median of |cand - ref| over the row's
// logits (at least `min_margin`). bf16 moves every logit by ~0.5-2%, so an absolute
// margin is either flaky (bf16 noise flips a close pair) or blind (f32); the median
// follows the noise of the whole row, while a bug that moves only a few logits (the
// top ones) leaves it small and is caught; a row that is wrong everywhere fails the
// relative L2 instead.
//
// The routing rule (MoE models, when both models' router logits are traced): every
// forward row's top-k expert choice from the candidate's router logits must equal the
// reference's, except where the reference's k-th and (k+1)-th logits are within
// `routing_errors` x the row's observed router error (the median |cand - ref| over its
// experts, as in the greedy rule: a bug that moves a few experts' logits leaves it
// small) of a tie: such a flip is excused, counted and reported. The router logit rows
// also get their own worst relative L2, so a wrong router (whose large error would
// excuse every flip) fails that instead. A candidate fed the reference's routing (teacher
// forcing: ForcedRouting) then computes every row on the reference's experts, and its
// logits are held to the plain relative L2 and greedy rules above; without forcing, a
// flipped row computes other experts and its sequence's logits differ beyond rounding.
//
// Test helper; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_FORWARD_COMPARE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_FORWARD_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/testing/test_models.h"

namespace lockstep::engine::testing {

struct CompareReport {
  int rows = 0;               // logit rows compared
  double worst_rel_l2 = 0.0;  // over every row
  int worst_row = -1;
  // Per sequence (prompt order): the position of its first logit row whose reference
  // top-2 margin is not above the rule's threshold, where greedy tokens may first
  // diverge; -1: none. Argmax is checked on the sequence's rows before it.
  std::vector<int64_t> first_low_margin_position;
  double largest_threshold = 0.0;  // of the rule, over the rows it was computed for
  int argmax_mismatches = 0;       // on checked rows
  int first_mismatch_row = -1;
  int first_mismatch_sequence = -1;
  int64_t first_mismatch_position = -1;
  // The routing rule (zero without router traces): forward rows x MoE layers checked,
  // the worst relative L2 of a router logit row, flips within the rule's tie threshold
  // (excused), and flips with a clear gap (failures; the first one's layer, sequence,
  // position).
  int routing_rows = 0;
  double worst_router_rel_l2 = 0.0;
  double largest_routing_threshold = 0.0;
  // Over every flip: the largest gap in units of its row's median router error.
  double largest_flip_gap_errors = 0.0;
  double largest_excused_gap = 0.0;
  int routing_flips_excused = 0;
  int routing_mismatches = 0;
  int first_routing_mismatch_layer = -1;
  int first_routing_mismatch_sequence = -1;
  int64_t first_routing_mismatch_position = -1;

  std::string ToString() const;
};

// The router logits of each MoE layer of a model's last Forward, as its tap records them
// (Transformer::set_router_tap; a device model's hook). CompareForwards clears it before
// each Forward.
struct RouterTrace {
  struct Layer {
    int layer = 0;
    int rows = 0;
    int experts = 0;
    std::vector<float> logits;  // [rows, experts]
  };
  std::vector<Layer> layers;

  void Record(int layer, const float* logits, int rows, int experts);
  const Layer* Find(int layer) const;  // null: not recorded
};

// Teacher-forced routing: the reference's choice for `layer` (RouteTopK of its traced
// logits: experts[rows, k] in ascending id, weights[rows, k]), for a candidate to use
// instead of its own. FailedPrecondition when the reference did not trace the layer
// with `rows` rows.
absl::Status ForcedRouting(const RouterTrace& reference, int layer, int rows, int k,
                           bool renormalize, int32_t* experts, float* weights);

struct CompareOptions {
  int decode_steps = 6;
  // The greedy rule's threshold: margin_errors x the row's median |cand - ref|, at least
  // min_margin (docs above).
  double margin_errors = 12.0;
  double min_margin = 0.0;
  // The routing rule (docs above): both traced, or neither (no rule). Not owned; the
  // callers' taps fill them during each Forward.
  RouterTrace* reference_router = nullptr;
  RouterTrace* candidate_router = nullptr;
  double routing_errors = 8.0;
};

// `reference_pool` is a host pool for `reference`; `candidate_pool` the candidate's
// pool (its memory, its layout) with as many blocks. Block ids come from
// `reference_pool`'s allocator.
absl::StatusOr<CompareReport> CompareForwards(const ForwardModel& reference,
                                              HostPool& reference_pool,
                                              const ForwardModel& candidate,
                                              const KvPoolView& candidate_pool,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              const CompareOptions& options);

// `count` prompts of the given lengths with tokens drawn from [0, vocab) by `seed`.
std::vector<std::vector<int32_t>> RandomPrompts(const std::vector<int>& lengths, int32_t vocab,
                                                uint64_t seed);

}  // namespace lockstep::engine::testing

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_FORWARD_COMPARE_H_
