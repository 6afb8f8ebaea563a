#include "runtime/cuda/cpu/kernel/block_executor.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/cuda/cpu/kernel/block_state.h"
#include "runtime/cuda/cpu/kernel/fiber_stacks.h"
#include "runtime/cuda/cpu/kernel/racecheck.h"
#include "runtime/cuda/cpu/kernel/schedule.h"
#include "runtime/cuda/cpu/segv_handler.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace lockstep::cuda_cpu::kernel {

thread_local const ThreadCoords* tls_coords = nullptr;
thread_local Block* tls_block = nullptr;
thread_local KernelThread* tls_thread = nullptr;

namespace {

constexpr int kWarpSize = 32;

// Whether two sync ops are at the same source line (the file names of one translation
// unit are usually one pointer).
bool SameSite(const KernelThread& a, const KernelThread& b) {
  return a.line == b.line && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

std::string Dim(uint3 v) { return absl::StrFormat("(%u,%u,%u)", v.x, v.y, v.z); }

const char* WarpOpName(WarpOpKind kind) {
  switch (kind) {
    case WarpOpKind::kSync:
      return "__syncwarp";
    case WarpOpKind::kShfl:
      return "__shfl_sync";
    case WarpOpKind::kShflUp:
      return "__shfl_up_sync";
    case WarpOpKind::kShflDown:
      return "__shfl_down_sync";
    case WarpOpKind::kShflXor:
      return "__shfl_xor_sync";
    case WarpOpKind::kBallot:
      return "__ballot_sync";
    case WarpOpKind::kAny:
      return "__any_sync";
    case WarpOpKind::kAll:
      return "__all_sync";
  }
  return "warp op";
}

std::string WaitSite(const KernelThread& t) {
  switch (t.state) {
    case ThreadState::kBarrier:
      return absl::StrCat("__syncthreads at ", t.file, ":", t.line);
    case ThreadState::kWarp:
      return absl::StrFormat("%s(mask 0x%08x) at %s:%d", WarpOpName(t.kind), t.mask, t.file,
                             t.line);
    case ThreadState::kNotStarted:
    case ThreadState::kRunnable:
      return "runnable";
    case ThreadState::kExited:
      return "exited";
  }
  return "";
}

// Returns the kernel thread to the scheduler; resumes once its op completed.
void Yield(Block& b) { b.scheduler = std::move(b.scheduler).resume(); }

void Release(Block& b, std::vector<int>& ascending) {
  for (int i : ascending) {
    b.threads[i].state = ThreadState::kRunnable;
    b.warp_waiting[i / kWarpSize] &= ~(1u << (i % kWarpSize));
  }
  b.queue.PushGroup(ascending);
}

void TryCompleteBarrier(Block& b) {
  if (b.at_barrier == 0 || b.at_barrier < b.live || b.failed) return;
  std::vector<int> waiting;
  const KernelThread* first = nullptr;
  for (KernelThread& t : b.threads) {
    if (t.state != ThreadState::kBarrier) continue;
    if (first == nullptr) {
      first = &t;
    } else if (!SameSite(t, *first)) {
      RecordFault(b, &t, cudaErrorLaunchFailure,
                  absl::StrCat("divergent __syncthreads: thread ", Dim(first->coords.thread_idx),
                               " waits at ", first->file, ":", first->line, ", this one at"),
                  t.file, t.line);
      return;
    }
    waiting.push_back(t.linear);
  }
  b.at_barrier = 0;
  if (b.race_checker != nullptr) b.race_checker->OnBarrier();
  Release(b, waiting);
}

// Completes the warp op `t` waits at if every lane of its mask waits at it too.
void TryCompleteWarp(Block& b, const KernelThread& t) {
  const int warp_base = t.linear / kWarpSize * kWarpSize;
  const int lanes = std::min<int>(kWarpSize, static_cast<int>(b.threads.size()) - warp_base);
  // Until the last lane arrives, the scan below stops at the first lane of the mask not
  // waiting yet (or at a mismatch before it) and changes nothing; it can only fault or
  // complete once every lane before the first missing one waits and that one does not
  // exist or has exited. So without scanning, as each lane arrives: O(32) per warp op
  // instead of O(32^2).
  const uint32_t missing = t.mask & ~b.warp_waiting[warp_base / kWarpSize];
  if (missing != 0) {
    const int first = std::countr_zero(missing);
    if (first < lanes && b.threads[warp_base + first].state != ThreadState::kExited) return;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (((t.mask >> lane) & 1u) == 0) continue;
    if (lane >= lanes) {
      RecordFault(b, &t, cudaErrorLaunchFailure,
                  absl::StrFormat("%s mask 0x%08x names lane %d, which does not exist (the "
                                  "block has %d threads)",
                                  WarpOpName(t.kind), t.mask, lane, b.threads.size()),
                  t.file, t.line);
      return;
    }
    const KernelThread& u = b.threads[warp_base + lane];
    if (u.state == ThreadState::kExited) {
      RecordFault(b, &t, cudaErrorLaunchFailure,
                  absl::StrFormat("%s mask 0x%08x names lane %d (thread %s), which has exited",
                                  WarpOpName(t.kind), t.mask, lane, Dim(u.coords.thread_idx)),
                  t.file, t.line);
      return;
    }
    if (u.state != ThreadState::kWarp || u.kind != t.kind || u.mask != t.mask) return;
    if (t.kind != WarpOpKind::kSync && !SameSite(u, t)) return;
  }
  uint64_t votes = 0;
  for (int lane = 0; lane < lanes; ++lane) {
    const KernelThread& u = b.threads[warp_base + lane];
    if (((t.mask >> lane) & 1u) != 0 && u.value != 0) votes |= uint64_t{1} << lane;
  }
  std::vector<int> released;
  for (int lane = 0; lane < lanes; ++lane) {
    if (((t.mask >> lane) & 1u) == 0) continue;
    KernelThread& u = b.threads[warp_base + lane];
    switch (t.kind) {
      case WarpOpKind::kSync:
        u.result = 0;
        break;
      case WarpOpKind::kBallot:
        u.result = votes;
        break;
      case WarpOpKind::kAny:
        u.result = votes != 0;
        break;
      case WarpOpKind::kAll:
        u.result = votes == t.mask;
        break;
      default:
        u.result = b.threads[warp_base + u.src_lane].value;
        break;
    }
    released.push_back(u.linear);
  }
  if (b.race_checker != nullptr) b.race_checker->OnWarpSync(warp_base, t.mask);
  Release(b, released);
}

void ExitThread(Block& b, KernelThread& t) {
  t.state = ThreadState::kExited;
  --b.live;
  const int warp_base = t.linear / kWarpSize * kWarpSize;
  const int lane = t.linear - warp_base;
  for (int i = warp_base; i < std::min<int>(warp_base + kWarpSize, b.threads.size()); ++i) {
    const KernelThread& u = b.threads[i];
    if (u.state == ThreadState::kWarp && ((u.mask >> lane) & 1u) != 0) {
      RecordFault(b, &u, cudaErrorLaunchFailure,
                  absl::StrFormat("%s mask 0x%08x names lane %d (thread %s), which exited "
                                  "without reaching it",
                                  WarpOpName(u.kind), u.mask, lane, Dim(t.coords.thread_idx)),
                  u.file, u.line);
      return;
    }
  }
  TryCompleteBarrier(b);
}

// Threads by wait site, as ranges of linear indices: "threads 0-31,64 wait at X".
std::string DeadlockReport(const Block& b) {
  std::map<std::string, std::vector<int>> by_site;
  for (const KernelThread& t : b.threads) {
    if (t.state != ThreadState::kExited) by_site[WaitSite(t)].push_back(t.linear);
  }
  std::string report = "deadlock: no thread can run;";
  for (const auto& [site, ids] : by_site) {
    std::string ranges;
    for (size_t i = 0; i < ids.size();) {
      size_t j = i;
      while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
      absl::StrAppend(&ranges, ranges.empty() ? "" : ",", ids[i]);
      if (j > i) absl::StrAppend(&ranges, "-", ids[j]);
      i = j + 1;
    }
    absl::StrAppend(&report, " threads ", ranges, " wait at ", site, ";");
  }
  return report;
}

void ThreadMain(Block& b, KernelThread& t) {
  b.spec->body(b.spec->context);
  ExitThread(b, t);
}

void StartFiber(Block& b, KernelThread& t) {
  t.fiber = boost::context::fiber(
      std::allocator_arg, PooledStack(), [&b, &t](boost::context::fiber&& scheduler) {
        b.scheduler = std::move(scheduler);
        char marker = 0;
        t.stack_high = reinterpret_cast<const std::byte*>(&marker) + 1024;
        t.stack_low = t.stack_high - kFiberStackBytes - 1024;
        ThreadMain(b, t);
        return std::move(b.scheduler);
      });
}

uint3 Unflatten(uint64_t linear, dim3 shape) {
  return uint3{static_cast<unsigned>(linear % shape.x),
               static_cast<unsigned>(linear / shape.x % shape.y),
               static_cast<unsigned>(linear / shape.x / shape.y)};
}

void RunBlock(Block& b, uint64_t block_linear) {
  const GridSpec& spec = *b.spec;
  const int n = static_cast<int>(b.threads.size());
  const uint3 block_idx = Unflatten(block_linear, spec.grid);
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) {
    KernelThread& t = b.threads[i];
    t = KernelThread{};
    t.linear = i;
    t.coords = ThreadCoords{Unflatten(i, spec.block), block_idx, spec.block, spec.grid};
    all[i] = i;
  }
  b.live = n;
  b.at_barrier = 0;
  b.warp_waiting.assign((n + kWarpSize - 1) / kWarpSize, 0);
  b.queue.Reset(b.schedule, block_linear);
  b.queue.PushGroup(all);
  if (spec.dynamic_shared_bytes > 0) std::memset(b.dynamic_shared, 0xFF, spec.dynamic_shared_bytes);
  if (b.race_checker != nullptr) b.race_checker->Reset(n);
  while (!b.failed) {
    const int next = b.queue.Pop();
    if (next < 0) {
      if (b.live > 0) {
        RecordFault(b, nullptr, cudaErrorLaunchFailure, DeadlockReport(b), "", 0);
      }
      break;
    }
    KernelThread& t = b.threads[next];
    if (t.state == ThreadState::kNotStarted) StartFiber(b, t);
    t.state = ThreadState::kRunnable;
    tls_thread = &t;
    tls_coords = &t.coords;
    t.fiber = std::move(t.fiber).resume();
    tls_thread = nullptr;
    tls_coords = nullptr;
  }
  // After a fault, unwind the suspended threads (Boost.Context's forced unwind).
  for (KernelThread& t : b.threads) t.fiber = boost::context::fiber();
}

std::mutex& LastFaultMutex() {
  static std::mutex mu;
  return mu;
}

std::string& LastFault() {
  static std::string* message = new std::string();
  return *message;
}

struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(128)); }
};

}  // namespace

std::string DescribeThread(const Block& block, const KernelThread& thread) {
  return absl::StrCat("kernel ", block.spec->kernel_name, " block ", Dim(thread.coords.block_idx),
                      " thread ", Dim(thread.coords.thread_idx));
}

void RecordFault(Block& block, const KernelThread* thread, cudaError_t error,
                 const std::string& what, const char* file, int line) {
  if (block.failed) return;
  block.failed = true;
  block.error = error;
  block.message = thread != nullptr ? DescribeThread(block, *thread)
                                    : absl::StrCat("kernel ", block.spec->kernel_name);
  absl::StrAppend(&block.message, ": ", what);
  if (line > 0) absl::StrAppend(&block.message, " (", file, ":", line, ")");
}

namespace {
std::atomic<uint64_t> grid_serials{0};
thread_local uint64_t tls_grid_serial = 0;
}  // namespace

uint64_t CurrentGridSerial() { return tls_grid_serial; }

cudaError_t RunGrid(const GridSpec& spec) {
  tls_grid_serial = ++grid_serials;
  Block b;
  b.spec = &spec;
  b.schedule = ProcessSchedule();
  b.threads.resize(static_cast<size_t>(spec.block.x) * spec.block.y * spec.block.z);
  std::unique_ptr<std::byte[], AlignedFree> shared;
  if (spec.dynamic_shared_bytes > 0) {
    shared.reset(new (std::align_val_t(128)) std::byte[spec.dynamic_shared_bytes]);
    b.dynamic_shared = shared.get();
  }
  std::unique_ptr<RaceChecker> race_checker;
  if (RaceCheckEnabled()) {
    race_checker = std::make_unique<RaceChecker>();
    b.race_checker = race_checker.get();
  }
  Block* const outer_block = tls_block;
  tls_block = &b;
  const uint64_t blocks = static_cast<uint64_t>(spec.grid.x) * spec.grid.y * spec.grid.z;
  const std::vector<uint32_t> order = blocks <= UINT32_MAX
                                          ? BlockOrder(b.schedule, static_cast<uint32_t>(blocks))
                                          : std::vector<uint32_t>();
  for (uint64_t i = 0; i < blocks && !b.failed; ++i) {
    RunBlock(b, order.empty() ? i : order[i]);
  }
  tls_block = outer_block;
  if (!b.failed) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(LastFaultMutex());
    LastFault() = b.message;
  }
  SetStickyError(b.error, b.message);
  return b.error;
}

void SyncThreads(const char* file, int line) {
  Block& b = *tls_block;
  KernelThread& t = *tls_thread;
  t.state = ThreadState::kBarrier;
  t.file = file;
  t.line = line;
  ++b.at_barrier;
  TryCompleteBarrier(b);
  Yield(b);
}

uint64_t WarpOp(WarpOpKind kind, unsigned mask, uint64_t value, int operand, int width,
                const char* file, int line) {
  Block& b = *tls_block;
  KernelThread& t = *tls_thread;
  const int lane = t.linear % kWarpSize;
  if (((mask >> lane) & 1u) == 0) {
    FailKernel(cudaErrorLaunchFailure,
               absl::StrFormat("%s mask 0x%08x does not name the calling lane %d", WarpOpName(kind),
                               mask, lane),
               file, line);
  }
  int src = lane;
  if (kind != WarpOpKind::kSync && kind != WarpOpKind::kBallot && kind != WarpOpKind::kAny &&
      kind != WarpOpKind::kAll) {
    if (width < 1 || width > kWarpSize || (width & (width - 1)) != 0) {
      FailKernel(
          cudaErrorLaunchFailure,
          absl::StrFormat("%s width %d is not a power of 2 in [1, 32]", WarpOpName(kind), width),
          file, line);
    }
    const int segment = lane / width * width;
    switch (kind) {
      case WarpOpKind::kShfl:
        src = segment + (operand & (width - 1));
        break;
      case WarpOpKind::kShflUp:
        if (lane - segment - operand >= 0) src = lane - operand;
        break;
      case WarpOpKind::kShflDown:
        if (lane - segment + operand < width) src = lane + operand;
        break;
      default:  // kShflXor: a lane of a later segment gives the lane's own value
        if ((lane ^ operand) < segment + width) src = lane ^ operand;
        break;
    }
    if (((mask >> src) & 1u) == 0) {
      FailKernel(cudaErrorLaunchFailure,
                 absl::StrFormat("%s on lane %d reads lane %d, which mask 0x%08x leaves out",
                                 WarpOpName(kind), lane, src, mask),
                 file, line);
    }
  }
  t.state = ThreadState::kWarp;
  b.warp_waiting[t.linear / kWarpSize] |= 1u << lane;
  t.kind = kind;
  t.mask = mask;
  t.value = value;
  t.src_lane = src;
  t.file = file;
  t.line = line;
  TryCompleteWarp(b, t);
  Yield(b);
  return t.result;
}

void FailKernel(cudaError_t error, const std::string& what, const char* file, int line) {
  Block& b = *tls_block;
  RecordFault(b, tls_thread, error, what, file, line);
  Yield(b);  // the scheduler never resumes a thread of a failed block
  std::abort();
}

void* DynamicShared() { return tls_block->dynamic_shared; }

std::string LastKernelFault() {
  std::lock_guard<std::mutex> lock(LastFaultMutex());
  return LastFault();
}

namespace {

// The SIGSEGV report's kernel thread (segv_handler.h): no allocation, snprintf only.
size_t FaultingKernelThread(char* buf, size_t size) {
  if (tls_block == nullptr || tls_thread == nullptr || size == 0) return 0;
  const ThreadCoords& c = tls_thread->coords;
  const int n = std::snprintf(buf, size, " in kernel %s block (%u,%u,%u) thread (%u,%u,%u)",
                              tls_block->spec->kernel_name.c_str(), c.block_idx.x, c.block_idx.y,
                              c.block_idx.z, c.thread_idx.x, c.thread_idx.y, c.thread_idx.z);
  return n < 0 ? 0 : std::min(static_cast<size_t>(n), size - 1);
}

const bool fault_context_registered = [] {
  internal::SetFaultContext(FaultingKernelThread);
  return true;
}();

}  // namespace

std::string CurrentKernelThread() {
  if (tls_block == nullptr || tls_thread == nullptr) return "";
  return DescribeThread(*tls_block, *tls_thread);
}

}  // namespace lockstep::cuda_cpu::kernel
