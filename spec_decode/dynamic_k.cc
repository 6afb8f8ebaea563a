#include "spec_decode/dynamic_k.h"

#include <algorithm>

namespace lockstep::spec {

DynamicK::DynamicK(int max_k, DynamicKOptions options)
    : options_(options), max_k_(std::max(max_k, 0)), k_(max_k_) {}

int DynamicK::Choose() const {
  const double a = acceptance();
  double use = 1.0;
  int k = 0;
  while (k < max_k_) {
    use *= a;
    if (use < options_.min_use) break;
    ++k;
  }
  return k;
}

void DynamicK::Observe(int proposed, int accepted) {
  if (max_k_ == 0) return;
  if (proposed <= 0) {
    if (k_ == 0 && ++idle_steps_ >= options_.probe_every) {
      k_ = 1;  // probe
      idle_steps_ = 0;
    }
    return;
  }
  accepted = std::clamp(accepted, 0, proposed);
  const double trials = accepted + (accepted < proposed ? 1 : 0);
  accepted_ = (1 - options_.alpha) * accepted_ + options_.alpha * accepted;
  trials_ = (1 - options_.alpha) * trials_ + options_.alpha * trials;
  k_ = Choose();
  idle_steps_ = 0;
}

}  // namespace lockstep::spec
