// Dynamic K: per request, the number of drafts to propose next step, from an
// exponentially weighted estimate of how often one draft is accepted.
//
// Each verified step contributes its accepted drafts and its trials (accepted drafts
// plus one if a draft was rejected): the per-draft acceptance rate a is the ratio of
// their exponentially weighted sums (weight `alpha` on the newest step). The j-th
// draft of a step is used only if all j are accepted, with chance about a^j, so K is
// the largest j <= max with a^j >= `min_use`: K shrinks while drafts keep failing and
// grows back as they succeed. At K = 0 nothing is verified, so every `probe_every`
// steps one draft is tried again. The estimate starts at a = 1 (K = max).
//
// Steps whose drafter proposed nothing (an n-gram drafter without a match) carry no
// information and change nothing.
//
// Value type owned by its request (executor thread).
#ifndef LOCKSTEP_SPEC_DECODE_DYNAMIC_K_H_
#define LOCKSTEP_SPEC_DECODE_DYNAMIC_K_H_

#include <cstdint>

namespace lockstep::spec {

struct DynamicKOptions {
  double alpha = 0.3;     // weight of the newest step
  double min_use = 0.2;   // propose a draft only if it is used at least this often
  int probe_every = 8;    // at K = 0, try one draft after this many steps
};

class DynamicK {
 public:
  explicit DynamicK(int max_k, DynamicKOptions options = {});

  // K for the next step, in [0, max_k].
  int k() const { return k_; }
  int max_k() const { return max_k_; }
  // The estimated per-draft acceptance rate.
  double acceptance() const { return trials_ > 0 ? accepted_ / trials_ : 1.0; }

  // A verified step: `proposed` drafts, `accepted` of them (a prefix).
  void Observe(int proposed, int accepted);

 private:
  int Choose() const;

  DynamicKOptions options_;
  int max_k_;
  int k_;
  double accepted_ = 1.0;  // weighted sums; the prior is one accepted trial
  double trials_ = 1.0;
  int idle_steps_ = 0;  // steps at K = 0 since the last probe
};

}  // namespace lockstep::spec

#endif  // LOCKSTEP_SPEC_DECODE_DYNAMIC_K_H_
