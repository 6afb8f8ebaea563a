#include "runtime/engine/cpu/testing/forward_compare.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/moe_route.h"

namespace lockstep::engine::testing {
namespace {

struct Sequence {
  std::vector<BlockId> blocks;
  std::vector<int32_t> tokens;  // prompt, then the reference's greedy tokens
};

int32_t Argmax(const float* row, int vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

class Comparer {
 public:
  Comparer(const ForwardModel& reference, HostPool& reference_pool, const ForwardModel& candidate,
           const KvPoolView& candidate_pool, const CompareOptions& options, int sequences)
      : reference_(reference),
        reference_pool_(reference_pool),
        candidate_(candidate),
        candidate_pool_(candidate_pool),
        options_(options),
        vocab_(reference.config().vocab_size) {
    report_.first_low_margin_position.assign(sequences, -1);
  }

  // Runs one forward on both and compares its logit rows; returns the reference's.
  absl::StatusOr<std::vector<float>> Step(const std::vector<ForwardRow>& rows,
                                          const std::vector<SequenceKv>& seqs,
                                          const std::vector<int32_t>& logit_rows) {
    const ForwardInput input{rows, seqs, logit_rows};
    reference_arena_.Reset();
    candidate_arena_.Reset();
    RouterTrace* const ref_router = options_.reference_router;
    RouterTrace* const got_router = options_.candidate_router;
    if ((ref_router == nullptr) != (got_router == nullptr)) {
      return absl::InvalidArgumentError("the routing rule needs both models' router traces");
    }
    if (ref_router != nullptr) ref_router->layers.clear();
    if (got_router != nullptr) got_router->layers.clear();
    ASSIGN_OR_RETURN(const float* ref,
                     reference_.Forward(input, reference_pool_.view(), reference_arena_, nullptr));
    std::vector<float> ref_copy(ref, ref + logit_rows.size() * static_cast<size_t>(vocab_));
    ASSIGN_OR_RETURN(const float* got,
                     candidate_.Forward(input, candidate_pool_, candidate_arena_, nullptr));
    if (ref_router != nullptr) RETURN_IF_ERROR(CompareRouting(rows, *ref_router, *got_router));
    for (size_t j = 0; j < logit_rows.size(); ++j) {
      const ForwardRow& row = rows[logit_rows[j]];
      Compare(ref_copy.data() + j * vocab_, got + j * vocab_, row.seq, row.position);
    }
    return ref_copy;
  }

  const CompareReport& report() const { return report_; }

 private:
  void Compare(const float* ref, const float* got, int seq, int64_t position) {
    const int row = report_.rows++;
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < vocab_; ++i) {
      const double d = static_cast<double>(got[i]) - ref[i];
      diff += d * d;
      norm += static_cast<double>(ref[i]) * ref[i];
    }
    const double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    if (!(rel <= report_.worst_rel_l2)) {  // NaN is worst
      report_.worst_rel_l2 = std::isnan(rel) ? INFINITY : rel;
      report_.worst_row = row;
    }
    int64_t& low_margin = report_.first_low_margin_position[seq];
    if (low_margin >= 0 && position >= low_margin) return;
    const int top = Argmax(ref, vocab_);
    float second = -INFINITY;
    for (int i = 0; i < vocab_; ++i) {
      if (i != top) second = std::max(second, ref[i]);
    }
    const double threshold = MarginThreshold(ref, got);
    report_.largest_threshold = std::max(report_.largest_threshold, threshold);
    if (!(ref[top] - second > threshold)) {
      low_margin = position;
      return;
    }
    if (Argmax(got, vocab_) != top) {
      ++report_.argmax_mismatches;
      if (report_.first_mismatch_row < 0) {
        report_.first_mismatch_row = row;
        report_.first_mismatch_sequence = seq;
        report_.first_mismatch_position = position;
      }
    }
  }

  // The routing rule (forward_compare.h) over every traced layer and forward row.
  absl::Status CompareRouting(const std::vector<ForwardRow>& rows, const RouterTrace& ref_trace,
                              const RouterTrace& got_trace) {
    if (ref_trace.layers.size() != got_trace.layers.size()) {
      return absl::InternalError(absl::StrCat("the reference traced ", ref_trace.layers.size(),
                                              " router layers, the candidate ",
                                              got_trace.layers.size()));
    }
    const int k = reference_.config().num_experts_per_tok;
    for (const RouterTrace::Layer& ref : ref_trace.layers) {
      const RouterTrace::Layer* got = got_trace.Find(ref.layer);
      if (got == nullptr || got->rows != ref.rows || got->experts != ref.experts ||
          ref.rows != static_cast<int>(rows.size()) || ref.experts <= k) {
        return absl::InternalError(absl::StrCat(
            "router logits of layer ", ref.layer, ": the reference traced ", ref.rows, " x ",
            ref.experts, ", the candidate ", got == nullptr ? 0 : got->rows, " x ",
            got == nullptr ? 0 : got->experts, ", for ", rows.size(), " rows and k ", k));
      }
      const int n = ref.experts;
      std::vector<int> ref_experts(k), got_experts(k);
      std::vector<float> gates(k), probs(n), sorted(n);
      std::vector<double> errors(n);
      for (int i = 0; i < ref.rows; ++i) {
        const float* r = ref.logits.data() + static_cast<size_t>(i) * n;
        const float* g = got->logits.data() + static_cast<size_t>(i) * n;
        ++report_.routing_rows;
        double diff = 0.0, norm = 0.0;
        for (int e = 0; e < n; ++e) {
          const double d = static_cast<double>(g[e]) - r[e];
          diff += d * d;
          norm += static_cast<double>(r[e]) * r[e];
          errors[e] = std::fabs(d);
        }
        const double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
        if (!(rel <= report_.worst_router_rel_l2)) {
          report_.worst_router_rel_l2 = std::isnan(rel) ? INFINITY : rel;
        }
        std::nth_element(errors.begin(), errors.begin() + n / 2, errors.end());
        const double threshold = options_.routing_errors * errors[n / 2];
        if (!(threshold <= report_.largest_routing_threshold)) {
          report_.largest_routing_threshold = std::isnan(threshold) ? INFINITY : threshold;
        }
        RouteTopK(r, n, k, false, ref_experts.data(), gates.data(), probs.data());
        RouteTopK(g, n, k, false, got_experts.data(), gates.data(), probs.data());
        if (ref_experts == got_experts) continue;
        std::copy(r, r + n, sorted.begin());
        std::nth_element(sorted.begin(), sorted.begin() + k - 1, sorted.end(), std::greater<>());
        const float kth = sorted[k - 1];
        const float next = *std::max_element(sorted.begin() + k, sorted.end());
        const double gap = static_cast<double>(kth) - next;
        report_.largest_flip_gap_errors =
            std::max(report_.largest_flip_gap_errors, gap / errors[n / 2]);
        if (gap <= threshold) {
          report_.largest_excused_gap = std::max(report_.largest_excused_gap, gap);
          ++report_.routing_flips_excused;
          continue;
        }
        if (report_.routing_mismatches++ == 0) {
          report_.first_routing_mismatch_layer = ref.layer;
          report_.first_routing_mismatch_sequence = rows[i].seq;
          report_.first_routing_mismatch_position = rows[i].position;
        }
      }
    }
    return absl::OkStatus();
  }

  // The greedy rule's threshold for one row: margin_errors x its median |got - ref|.
  double MarginThreshold(const float* ref, const float* got) {
    errors_.resize(vocab_);
    for (int i = 0; i < vocab_; ++i) errors_[i] = std::fabs(static_cast<double>(got[i]) - ref[i]);
    std::nth_element(errors_.begin(), errors_.begin() + vocab_ / 2, errors_.end());
    const double median = errors_[vocab_ / 2];
    return std::max(options_.min_margin, options_.margin_errors * median);
  }

  const ForwardModel& reference_;
  HostPool& reference_pool_;
  const ForwardModel& candidate_;
  const KvPoolView candidate_pool_;
  const CompareOptions options_;
  const int vocab_;
  Arena reference_arena_;
  Arena candidate_arena_;
  CompareReport report_;
  std::vector<double> errors_;  // scratch of MarginThreshold
};

}  // namespace

std::string CompareReport::ToString() const {
  std::string text =
      absl::StrCat(rows, " logit rows: worst relative L2 ", worst_rel_l2, " (row ", worst_row,
                   "); greedy: ", argmax_mismatches, " argmax mismatches");
  if (first_mismatch_row >= 0) {
    absl::StrAppend(&text, " (first at row ", first_mismatch_row, ": sequence ",
                    first_mismatch_sequence, " position ", first_mismatch_position, ")");
  }
  absl::StrAppend(&text, "; largest margin threshold ", largest_threshold,
                  "; first position with a top-2 margin not above it, per sequence:");
  for (size_t s = 0; s < first_low_margin_position.size(); ++s) {
    absl::StrAppend(&text, s == 0 ? " " : ", ",
                    first_low_margin_position[s] < 0 ? std::string("none")
                                                     : absl::StrCat(first_low_margin_position[s]));
  }
  if (routing_rows > 0) {
    absl::StrAppend(&text, "; routing: ", routing_rows, " rows x layers, worst router relative L2 ",
                    worst_router_rel_l2, ", largest tie threshold ", largest_routing_threshold,
                    ", ", routing_flips_excused, " flips within it (excused; largest gap ",
                    largest_excused_gap, "; largest flip gap ", largest_flip_gap_errors,
                    " median errors), ",
                    routing_mismatches, " with a clear gap");
    if (routing_mismatches > 0) {
      absl::StrAppend(&text, " (first at layer ", first_routing_mismatch_layer, ": sequence ",
                      first_routing_mismatch_sequence, " position ",
                      first_routing_mismatch_position, ")");
    }
  }
  return text;
}

void RouterTrace::Record(int layer, const float* logits, int rows, int experts) {
  layers.push_back({layer, rows, experts,
                    std::vector<float>(logits, logits + static_cast<size_t>(rows) * experts)});
}

const RouterTrace::Layer* RouterTrace::Find(int layer) const {
  for (const Layer& l : layers) {
    if (l.layer == layer) return &l;
  }
  return nullptr;
}

absl::Status ForcedRouting(const RouterTrace& reference, int layer, int rows, int k,
                           bool renormalize, int32_t* experts, float* weights) {
  const RouterTrace::Layer* ref = reference.Find(layer);
  if (ref == nullptr || ref->rows != rows || ref->experts < k) {
    return absl::FailedPreconditionError(
        absl::StrCat("no reference routing for layer ", layer, " with ", rows, " rows (",
                     ref == nullptr ? "not traced" : absl::StrCat(ref->rows, " traced"), ")"));
  }
  std::vector<int> chosen(k);
  std::vector<float> probs(ref->experts);
  for (int i = 0; i < rows; ++i) {
    RouteTopK(ref->logits.data() + static_cast<size_t>(i) * ref->experts, ref->experts, k,
              renormalize, chosen.data(), weights + static_cast<size_t>(i) * k, probs.data());
    for (int j = 0; j < k; ++j) experts[static_cast<size_t>(i) * k + j] = chosen[j];
  }
  return absl::OkStatus();
}

std::vector<std::vector<int32_t>> RandomPrompts(const std::vector<int>& lengths, int32_t vocab,
                                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int n : lengths) {
    std::vector<int32_t>& p = prompts.emplace_back();
    for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(rng() % vocab));
  }
  return prompts;
}

absl::StatusOr<CompareReport> CompareForwards(const ForwardModel& reference,
                                              HostPool& reference_pool,
                                              const ForwardModel& candidate,
                                              const KvPoolView& candidate_pool,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              const CompareOptions& options) {
  constexpr int kVerify = 4;  // the last token and three drafts
  const int vocab = reference.config().vocab_size;
  Comparer comparer(reference, reference_pool, candidate, candidate_pool, options,
                    static_cast<int>(prompts.size()));
  std::vector<Sequence> sequences(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    sequences[s].tokens = prompts[s];
    RETURN_IF_ERROR(reference_pool.Cover(
        sequences[s].blocks,
        static_cast<int64_t>(prompts[s].size()) + options.decode_steps + kVerify + 1));
  }
  std::vector<SequenceKv> kvs;
  for (const Sequence& s : sequences) kvs.push_back(SequenceKv{s.blocks});

  // Every prompt in one forward: the logits of each last row.
  std::vector<ForwardRow> rows;
  std::vector<int32_t> logit_rows;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::vector<int32_t>& tokens = sequences[s].tokens;
    for (size_t p = 0; p < tokens.size(); ++p) {
      rows.push_back({tokens[p], static_cast<int64_t>(p), static_cast<int32_t>(s)});
    }
    logit_rows.push_back(static_cast<int32_t>(rows.size()) - 1);
  }
  ASSIGN_OR_RETURN(std::vector<float> ref, comparer.Step(rows, kvs, logit_rows));
  for (size_t s = 0; s < sequences.size(); ++s) {
    sequences[s].tokens.push_back(Argmax(ref.data() + s * vocab, vocab));
  }
  // Decode steps on the reference's tokens.
  for (int step = 0; step < options.decode_steps; ++step) {
    rows.clear();
    logit_rows.clear();
    for (size_t s = 0; s < sequences.size(); ++s) {
      const std::vector<int32_t>& tokens = sequences[s].tokens;
      logit_rows.push_back(static_cast<int32_t>(rows.size()));
      rows.push_back(
          {tokens.back(), static_cast<int64_t>(tokens.size()) - 1, static_cast<int32_t>(s)});
    }
    ASSIGN_OR_RETURN(ref, comparer.Step(rows, kvs, logit_rows));
    for (size_t s = 0; s < sequences.size(); ++s) {
      sequences[s].tokens.push_back(Argmax(ref.data() + s * vocab, vocab));
    }
  }
  // One verification of three drafts per sequence: four rows with logits each.
  rows.clear();
  logit_rows.clear();
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::vector<int32_t>& tokens = sequences[s].tokens;
    const int64_t last = static_cast<int64_t>(tokens.size()) - 1;
    for (int j = 0; j < kVerify; ++j) {
      const int32_t token = j == 0 ? tokens.back() : (tokens.back() * 7 + 3 * j) % vocab;
      logit_rows.push_back(static_cast<int32_t>(rows.size()));
      rows.push_back({token, last + j, static_cast<int32_t>(s)});
    }
  }
  RETURN_IF_ERROR(comparer.Step(rows, kvs, logit_rows).status());
  return comparer.report();
}

}  // namespace lockstep::engine::testing
