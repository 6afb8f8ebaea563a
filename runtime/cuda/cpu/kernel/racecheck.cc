#include "runtime/cuda/cpu/kernel/racecheck.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "runtime/cuda/cpu/kernel/block_state.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

constexpr int kWarpSize = 32;

// -1: not read from the environment yet.
std::atomic<int> race_check_state{-1};

}  // namespace

bool RaceCheckEnabled() {
  int state = race_check_state.load(std::memory_order_acquire);
  if (state < 0) {
    const char* env = std::getenv("LOCKSTEP_CUDA_CPU_RACECHECK");
    state = env != nullptr && std::strcmp(env, "1") == 0 ? 1 : 0;
    int expected = -1;
    if (!race_check_state.compare_exchange_strong(expected, state)) state = expected;
  }
  return state == 1;
}

void SetRaceCheckEnabled(bool enabled) { race_check_state.store(enabled ? 1 : 0); }

void RaceChecker::Reset(int threads) {
  shadow_.clear();
  clocks_.assign(threads, std::array<uint32_t, 32>{});
}

void RaceChecker::OnBarrier() { shadow_.clear(); }

void RaceChecker::OnWarpSync(int warp_base, unsigned mask) {
  std::array<uint32_t, 32> merged{};
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (((mask >> lane) & 1u) == 0) continue;
    std::array<uint32_t, 32>& own = clocks_[warp_base + lane];
    ++own[lane];
    for (int i = 0; i < kWarpSize; ++i) merged[i] = std::max(merged[i], own[i]);
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (((mask >> lane) & 1u) != 0) clocks_[warp_base + lane] = merged;
  }
}

bool RaceChecker::Ordered(int before, uint32_t clock, int thread) const {
  if (before == thread) return true;
  if (before / kWarpSize != thread / kWarpSize) return false;
  return clocks_[thread][before % kWarpSize] > clock;
}

void RaceChecker::Report(const void* address, int first, bool first_wrote, int second,
                         bool second_writes) {
  const Block& b = *tls_block;
  const KernelThread& other = b.threads[first];
  const std::byte* p = static_cast<const std::byte*>(address);
  std::string where = absl::StrFormat("address %p", address);
  if (b.dynamic_shared != nullptr && p >= b.dynamic_shared &&
      p < b.dynamic_shared + b.spec->dynamic_shared_bytes) {
    where = absl::StrFormat("dynamic shared memory byte %d", p - b.dynamic_shared);
  }
  const uint3 o = other.coords.thread_idx;
  FailKernel(cudaErrorLaunchFailure,
             absl::StrFormat("racecheck: %s %s, which thread (%u,%u,%u) %s since the last "
                             "__syncthreads with nothing ordering the two",
                             second_writes ? "writes" : "reads", where, o.x, o.y, o.z,
                             first_wrote ? "wrote" : "read"),
             "", 0);
}

void RaceChecker::Access(const void* address, size_t size, bool write) {
  const KernelThread& t = *tls_thread;
  const std::byte* p = static_cast<const std::byte*>(address);
  if (p >= t.stack_low && p < t.stack_high) return;  // the thread's own locals
  const int me = t.linear;
  const uint32_t my_clock = clocks_[me][me % kWarpSize];
  for (size_t i = 0; i < size; ++i) {
    const void* byte = p + i;
    Shadow& s = shadow_[reinterpret_cast<uintptr_t>(byte)];
    if (s.writer >= 0 && !Ordered(s.writer, s.writer_clock, me)) {
      Report(byte, s.writer, true, me, write);
    }
    if (write) {
      for (int r = 0; r < kMaxReaders; ++r) {
        if (s.readers[r] >= 0 && !Ordered(s.readers[r], s.reader_clocks[r], me)) {
          Report(byte, s.readers[r], false, me, true);
        }
        s.readers[r] = -1;
      }
      s.writer = me;
      s.writer_clock = my_clock;
      continue;
    }
    int slot = -1;
    for (int r = 0; r < kMaxReaders; ++r) {
      if (s.readers[r] == me || (slot < 0 && s.readers[r] < 0)) slot = r;
      if (s.readers[r] == me) break;
    }
    if (slot >= 0) {
      s.readers[slot] = me;
      s.reader_clocks[slot] = my_clock;
    }
  }
}

}  // namespace lockstep::cuda_cpu::kernel

namespace {

inline void Traced(const void* address, size_t size, bool write) {
  using lockstep::cuda_cpu::kernel::tls_block;
  using lockstep::cuda_cpu::kernel::tls_thread;
  if (tls_thread == nullptr || tls_block->race_checker == nullptr) return;
  tls_block->race_checker->Access(address, size, write);
}

}  // namespace

// The callbacks of clang's -fsanitize-coverage=trace-loads,trace-stores.
extern "C" {
__attribute__((weak)) void __sanitizer_cov_load1(uint8_t* p) { Traced(p, 1, false); }
__attribute__((weak)) void __sanitizer_cov_load2(uint16_t* p) { Traced(p, 2, false); }
__attribute__((weak)) void __sanitizer_cov_load4(uint32_t* p) { Traced(p, 4, false); }
__attribute__((weak)) void __sanitizer_cov_load8(uint64_t* p) { Traced(p, 8, false); }
__attribute__((weak)) void __sanitizer_cov_load16(__int128* p) { Traced(p, 16, false); }
__attribute__((weak)) void __sanitizer_cov_store1(uint8_t* p) { Traced(p, 1, true); }
__attribute__((weak)) void __sanitizer_cov_store2(uint16_t* p) { Traced(p, 2, true); }
__attribute__((weak)) void __sanitizer_cov_store4(uint32_t* p) { Traced(p, 4, true); }
__attribute__((weak)) void __sanitizer_cov_store8(uint64_t* p) { Traced(p, 8, true); }
__attribute__((weak)) void __sanitizer_cov_store16(__int128* p) { Traced(p, 16, true); }
}
