// Fault injection (faults.h): armed faults counted down under one lock.
#include "runtime/cuda/cpu/faults.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/cpu/runtime_state.h"

namespace lockstep::cuda_cpu {
namespace {

using testing::Fault;

struct Armed {
  Fault fault;
  int remaining;
  std::string filter;
};

struct Faults {
  std::mutex mu;
  bool env_read = false;
  std::vector<Armed> armed;
  std::atomic<bool> any{true};  // false once the environment is read and nothing is armed
};
Faults& F() {
  static Faults* f = new Faults;
  return *f;
}

[[noreturn]] void BadSpec(const std::string& spec, const char* why) {
  std::fprintf(stderr, "cuda_cpu: LOCKSTEP_CUDA_CPU_FAULTS: '%s': %s\n", spec.c_str(), why);
  std::abort();
}

// Parses one KIND:N[@FILTER].
Armed ParseOne(const std::string& spec) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) BadSpec(spec, "expected KIND:N[@FILTER]");
  const std::string kind = spec.substr(0, colon);
  std::string rest = spec.substr(colon + 1);
  Armed a{Fault::kAllocationFails, 0, ""};
  if (const size_t at = rest.find('@'); at != std::string::npos) {
    a.filter = rest.substr(at + 1);
    rest = rest.substr(0, at);
  }
  if (kind == "alloc") {
    a.fault = Fault::kAllocationFails;
  } else if (kind == "illegal_address") {
    a.fault = Fault::kOpIllegalAddress;
  } else if (kind == "hang") {
    a.fault = Fault::kOpHangs;
  } else if (kind == "graph_launch") {
    a.fault = Fault::kGraphLaunchFails;
  } else {
    BadSpec(spec, "KIND is alloc, illegal_address, hang or graph_launch");
  }
  char* end = nullptr;
  const long n = std::strtol(rest.c_str(), &end, 10);
  if (rest.empty() || *end != '\0' || n < 1 || n > 1000000000) {
    BadSpec(spec, "N is an integer >= 1");
  }
  a.remaining = static_cast<int>(n);
  return a;
}

void ReadEnvLocked(Faults& f) {
  if (f.env_read) return;
  f.env_read = true;
  const char* text = std::getenv("LOCKSTEP_CUDA_CPU_FAULTS");
  if (text == nullptr) return;
  std::string all(text);
  size_t start = 0;
  while (start < all.size()) {
    size_t comma = all.find(',', start);
    if (comma == std::string::npos) comma = all.size();
    if (comma > start) f.armed.push_back(ParseOne(all.substr(start, comma - start)));
    start = comma + 1;
  }
}

// Counts one event of kind `fault` (named `name` for ops); whether a fault fires.
bool Fires(Fault fault, const std::string& name) {
  Faults& f = F();
  if (!f.any.load(std::memory_order_acquire)) return false;  // every op asks: no lock then
  std::lock_guard lock(f.mu);
  ReadEnvLocked(f);
  bool fires = false;
  for (auto it = f.armed.begin(); it != f.armed.end();) {
    if (it->fault == fault && name.find(it->filter) != std::string::npos && --it->remaining == 0) {
      fires = true;
      it = f.armed.erase(it);
    } else {
      ++it;
    }
  }
  f.any = !f.armed.empty();
  return fires;
}

}  // namespace

namespace testing {

void InjectFault(Fault fault, int nth, std::string filter) {
  Faults& f = F();
  std::lock_guard lock(f.mu);
  ReadEnvLocked(f);
  f.armed.push_back(Armed{fault, nth < 1 ? 1 : nth, std::move(filter)});
  f.any = true;
}

void ClearFaults() {
  Faults& f = F();
  std::lock_guard lock(f.mu);
  f.env_read = true;
  f.armed.clear();
  f.any = false;
}

void ClearStickyErrors() { internal::ClearStickyErrors(); }

}  // namespace testing

namespace internal {

cudaError_t RunWithFaults(const std::string& name, const StreamOp& op) {
  if (Fires(Fault::kOpHangs, name)) {
    std::fprintf(stderr, "cuda_cpu: injected fault: stream op %s hangs\n", name.c_str());
    HangUntilStreamDestroyed();
    return cudaSuccess;
  }
  if (Fires(Fault::kOpIllegalAddress, name)) {
    SetStickyErrorOn(CurrentDevice(), cudaErrorIllegalAddress,
                     "injected fault in stream op " + name);
    return cudaErrorIllegalAddress;
  }
  return op();
}

bool AllocationFails() { return Fires(Fault::kAllocationFails, ""); }
bool GraphLaunchFails() { return Fires(Fault::kGraphLaunchFails, ""); }

}  // namespace internal
}  // namespace lockstep::cuda_cpu
