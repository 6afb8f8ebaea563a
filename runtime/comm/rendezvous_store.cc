#include "runtime/comm/rendezvous_store.h"

#include "absl/strings/string_view.h"

namespace lockstep::comm {

RendezvousStore::RendezvousStore(RendezvousClient* client, absl::Duration default_wait)
    : client_(client), default_wait_(default_wait) {}

void RendezvousStore::set(const std::string& key, const std::vector<char>& data) {
  Record(client_->Set(key, absl::string_view(data.data(), data.size())));
}

std::vector<char> RendezvousStore::get(const std::string& key) {
  absl::StatusOr<std::string> value = client_->Get(key);
  if (!value.ok()) {
    Record(value.status());
    return {};
  }
  return std::vector<char>(value->begin(), value->end());
}

void RendezvousStore::wait(const std::vector<std::string>& keys) {
  wait(keys, absl::ToChronoMilliseconds(default_wait_));
}

void RendezvousStore::wait(const std::vector<std::string>& keys,
                           const std::chrono::milliseconds& timeout) {
  Record(client_->Wait(keys, absl::FromChrono(timeout)));
}

absl::Status RendezvousStore::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

void RendezvousStore::Record(const absl::Status& status) {
  if (status.ok()) return;
  absl::MutexLock lock(&mu_);
  if (first_error_.ok()) first_error_ = status;
}

}  // namespace lockstep::comm
