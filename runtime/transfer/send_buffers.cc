#include "runtime/transfer/send_buffers.h"

#include <utility>

namespace lockstep::transfer {
namespace {

// A taken buffer: the span handed out points into `storage`.
struct Taken {
  std::vector<std::byte> storage;
  absl::Span<std::byte> span;
};

}  // namespace

SendBuffers::SendBuffers(size_t max_idle) : shared_(std::make_shared<Shared>(max_idle)) {}

std::shared_ptr<absl::Span<std::byte>> SendBuffers::Take(size_t bytes) {
  auto taken = std::make_unique<Taken>();
  {
    absl::MutexLock lock(&shared_->mu);
    if (!shared_->idle.empty()) {
      taken->storage = std::move(shared_->idle.back());
      shared_->idle.pop_back();
    }
  }
  if (taken->storage.size() < bytes) taken->storage.resize(bytes);
  taken->span = absl::MakeSpan(taken->storage.data(), bytes);
  absl::Span<std::byte>* span = &taken->span;
  // The deleter owns `taken`; the mutex orders the last user's reads before the reuse.
  return std::shared_ptr<absl::Span<std::byte>>(
      span, [shared = shared_, taken = std::shared_ptr<Taken>(std::move(taken))](
                absl::Span<std::byte>*) {
        absl::MutexLock lock(&shared->mu);
        if (shared->idle.size() < shared->max_idle) {
          shared->idle.push_back(std::move(taken->storage));
        }
      });
}

size_t SendBuffers::idle() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->idle.size();
}

}  // namespace lockstep::transfer
