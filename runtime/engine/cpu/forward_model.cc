#include "runtime/engine/cpu/forward_model.h"

#include <vector>

namespace lockstep::engine {
namespace {

class HostSpecBuffer final : public SpecBuffer {
 public:
  explicit HostSpecBuffer(size_t floats) : values_(floats, 0.0f) {}
  float* data() override { return values_.data(); }

 private:
  std::vector<float> values_;
};

}  // namespace

std::unique_ptr<SpecBuffer> ForwardModel::NewSpecBuffer(int tokens) const {
  // The spec layout does not depend on tokens_per_block.
  return std::make_unique<HostSpecBuffer>(SpecBufferFloats(Layout(1), tokens));
}

}  // namespace lockstep::engine
