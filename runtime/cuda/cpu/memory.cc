// Device and pinned host memory (memory.h), the allocation registry
// (FindAllocation), and the allocation calls of the runtime API.
#include "runtime/cuda/cpu/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "cuda_runtime_api.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/cpu/runtime_state.h"
#include "runtime/cuda/cpu/segv_handler.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace lockstep::cuda_cpu {
namespace internal {
namespace {

constexpr size_t kAlignment = 256;
constexpr size_t kQuarantineEntries = 4096;
constexpr size_t kQuarantineBytes = size_t{16} << 30;  // address space, not memory

struct Mapping {
  void* start = nullptr;  // of the mapping (guard page included)
  size_t length = 0;
  Allocation allocation;
  size_t charged = 0;  // bytes counted against the device's cap
};

struct Registry {
  std::shared_mutex mu;
  std::map<uintptr_t, Mapping> by_base;
  std::vector<size_t> in_use = std::vector<size_t>(64, 0);
  std::deque<Mapping> quarantine;  // freed, inaccessible; oldest first
  size_t quarantined_bytes = 0;
};
Registry& R() {
  static Registry* r = new Registry;
  return *r;
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A memory file of 0xFF bytes that fresh allocations up to kPoisonLimit map privately
// (copy on write): an allocation reads as poison from the start, and only the pages that
// are touched cost anything, where filling each allocation wrote every page (a 32 MiB
// GEMM workspace per cuBLASLt probe, mostly never touched). The file is filled up to the
// largest mapping so far. -1 where memfd_create fails: then each allocation is filled.
class PoisonFile {
 public:
  // The file's descriptor, holding at least `bytes` of 0xFF; -1 if there is none.
  int Holding(size_t bytes) {
    std::lock_guard lock(mu_);
    if (fd_ == -2) fd_ = memfd_create("cuda_cpu_poison", MFD_CLOEXEC);
    if (fd_ < 0 || bytes <= filled_) return fd_;
    if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) return Fail();
    void* p = mmap(nullptr, bytes - filled_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                   static_cast<off_t>(filled_));
    if (p == MAP_FAILED) return Fail();
    std::memset(p, 0xFF, bytes - filled_);
    munmap(p, bytes - filled_);
    filled_ = bytes;
    return fd_;
  }

 private:
  int Fail() {
    close(fd_);
    fd_ = -1;
    return fd_;
  }

  std::mutex mu_;
  int fd_ = -2;  // -2: not made yet
  size_t filled_ = 0;
};
PoisonFile& Poison() {
  static PoisonFile* p = new PoisonFile;
  return *p;
}

// Makes a freed mapping inaccessible and keeps it a while; unmaps the oldest.
void QuarantineLocked(Registry& r, const Mapping& m) {
  madvise(m.start, m.length, MADV_DONTNEED);
  mprotect(m.start, m.length, PROT_NONE);
  r.quarantine.push_back(m);
  r.quarantined_bytes += m.length;
  while (r.quarantine.size() > kQuarantineEntries || r.quarantined_bytes > kQuarantineBytes) {
    munmap(r.quarantine.front().start, r.quarantine.front().length);
    r.quarantined_bytes -= r.quarantine.front().length;
    r.quarantine.pop_front();
  }
}

bool Contains(const Mapping& m, uintptr_t address) {
  const auto start = reinterpret_cast<uintptr_t>(m.start);
  return address >= start && address < start + m.length;
}

// "the 1000-byte device allocation at 0x..." into buf.
int Name(const Allocation& a, bool freed, char* buf, size_t size) {
  return std::snprintf(buf, size, "the %s%zu-byte %s allocation at %p (device %d)",
                       freed ? "freed " : "", a.bytes, a.device ? "device" : "pinned host",
                       static_cast<const void*>(a.base), a.device_ordinal);
}

// Where `address` lies against `a` (its mapping holds it, or it is the nearest).
size_t Describe(const Allocation& a, bool freed, uintptr_t address, bool in_mapping, char* buf,
                size_t size) {
  const auto base = reinterpret_cast<uintptr_t>(a.base);
  const size_t end = base + a.bytes;
  int n = 0;
  if (address >= base && address < end) {
    n = std::snprintf(buf, size, "offset %zu of ", static_cast<size_t>(address - base));
  } else if (address >= end) {
    n = std::snprintf(buf, size, "%zu bytes past the end of ", static_cast<size_t>(address - end));
  } else {
    n = std::snprintf(buf, size, "%zu bytes before ", static_cast<size_t>(base - address));
  }
  if (n < 0 || static_cast<size_t>(n) >= size) return size > 0 ? size - 1 : 0;
  n += Name(a, freed, buf + n, size - n);
  if (static_cast<size_t>(n) >= size) return size - 1;
  const char* tail = freed              ? ": a use after free"
                     : !in_mapping      ? " (the nearest allocation; the address is in none)"
                     : address >= end   ? ", in its padding or guard page"
                                        : "";
  n += std::snprintf(buf + n, size - n, "%s", tail);
  return static_cast<size_t>(n) >= size ? size - 1 : static_cast<size_t>(n);
}

}  // namespace

cudaError_t Allocate(size_t bytes, bool device, int ordinal, void** out) {
  const size_t rounded = RoundUp(bytes == 0 ? 1 : bytes, kAlignment);
  const size_t page = PageSize();
  const size_t body = RoundUp(rounded, page);
  Registry& r = R();
  {
    std::unique_lock lock(r.mu);
    if (device && r.in_use[ordinal] + rounded > MemoryCap()) return cudaErrorMemoryAllocation;
    if (device) r.in_use[ordinal] += rounded;
  }
  InstallSegvHandler();
  const int poison = rounded <= kPoisonLimit ? Poison().Holding(body + page) : -1;
  void* start = mmap(nullptr, body + page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_NORESERVE | (poison < 0 ? MAP_ANONYMOUS : 0), poison, 0);
  if (start == MAP_FAILED) {
    std::unique_lock lock(r.mu);
    if (device) r.in_use[ordinal] -= rounded;
    return cudaErrorMemoryAllocation;
  }
  auto* guard = static_cast<std::byte*>(start) + body;
  mprotect(guard, page, PROT_NONE);
  std::byte* base = guard - rounded;
  if (rounded <= kPoisonLimit && poison < 0) std::memset(base, 0xFF, rounded);
  std::unique_lock lock(r.mu);
  r.by_base[reinterpret_cast<uintptr_t>(base)] =
      Mapping{start, body + page, Allocation{base, bytes, device, ordinal}, device ? rounded : 0};
  *out = base;
  return cudaSuccess;
}

cudaError_t Release(void* base, bool device) {
  Registry& r = R();
  std::unique_lock lock(r.mu);
  auto it = r.by_base.find(reinterpret_cast<uintptr_t>(base));
  if (it == r.by_base.end() || it->second.allocation.device != device) {
    return cudaErrorInvalidValue;
  }
  const Mapping m = it->second;
  r.by_base.erase(it);
  if (device) r.in_use[m.allocation.device_ordinal] -= m.charged;
  QuarantineLocked(r, m);
  return cudaSuccess;
}

size_t DescribeAddress(const void* address, char* buf, size_t size) {
  if (size == 0) return 0;
  buf[0] = '\0';
  Registry& r = R();
  if (!r.mu.try_lock_shared()) {
    return static_cast<size_t>(std::snprintf(buf, size, "(the allocation registry is busy)"));
  }
  const auto key = reinterpret_cast<uintptr_t>(address);
  size_t n = 0;
  const Mapping* nearest = nullptr;
  uintptr_t best = UINTPTR_MAX;
  for (auto it = r.quarantine.rbegin(); it != r.quarantine.rend() && n == 0; ++it) {
    if (Contains(*it, key)) n = Describe(it->allocation, true, key, true, buf, size);
  }
  if (n == 0) {
    // The mapping holding the address (its guard page after it), else the nearest one.
    auto after = r.by_base.upper_bound(key);
    if (after != r.by_base.end()) {
      nearest = &after->second;
      best = after->first - key;
    }
    if (after != r.by_base.begin()) {
      const Mapping& before = std::prev(after)->second;
      const uintptr_t end = reinterpret_cast<uintptr_t>(before.start) + before.length;
      if (Contains(before, key) || key - end < best) nearest = &before;
    }
    if (nearest != nullptr) {
      n = Describe(nearest->allocation, false, key, Contains(*nearest, key), buf, size);
    } else {
      n = static_cast<size_t>(std::snprintf(buf, size, "no allocation is live"));
    }
  }
  r.mu.unlock_shared();
  return n >= size ? size - 1 : n;
}

size_t DeviceBytesInUse(int device) {
  Registry& r = R();
  std::shared_lock lock(r.mu);
  return r.in_use[device];
}

void ZeroPages(void* p, size_t bytes) {
  const size_t page = PageSize();
  const auto begin = RoundUp(reinterpret_cast<uintptr_t>(p), page);
  const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  auto* first = static_cast<std::byte*>(p);
  if (end <= begin) {
    std::memset(first, 0, bytes);
    return;
  }
  std::memset(first, 0, begin - reinterpret_cast<uintptr_t>(p));
  // Fresh anonymous pages in place (not madvise: a poisoned mapping would read 0xFF).
  if (mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
    std::memset(reinterpret_cast<void*>(begin), 0, end - begin);
  }
  std::memset(reinterpret_cast<void*>(end), 0, reinterpret_cast<uintptr_t>(p) + bytes - end);
}

}  // namespace internal

std::optional<Allocation> FindAllocation(const void* address) {
  internal::Registry& r = internal::R();
  std::shared_lock lock(r.mu);
  const auto key = reinterpret_cast<uintptr_t>(address);
  auto it = r.by_base.upper_bound(key);
  if (it == r.by_base.begin()) return std::nullopt;
  --it;
  const Allocation& a = it->second.allocation;
  if (key >= it->first + (a.bytes == 0 ? 1 : a.bytes)) return std::nullopt;
  return a;
}

}  // namespace lockstep::cuda_cpu

namespace cc = lockstep::cuda_cpu;
namespace ci = lockstep::cuda_cpu::internal;

namespace {

// cudaMalloc's checks and allocation, shared with cudaMallocAsync.
cudaError_t MallocDevice(void** devPtr, size_t size) {
  if (devPtr == nullptr) return ci::Ret(cudaErrorInvalidValue);
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  if (ci::AllocationFails()) return ci::Ret(cudaErrorMemoryAllocation);
  return ci::Ret(ci::Allocate(size, true, cc::CurrentDevice(), devPtr));
}

// Waits for every device's work (as CUDA's frees do), then frees.
cudaError_t SyncAndRelease(void* ptr, bool device) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  {
    std::unique_lock lock(ci::Mu());
    if (const cudaError_t e = ci::CheckUnsafeCallLocked(); e != cudaSuccess) return ci::Ret(e);
    ci::DrainLocked(lock, -1);
  }
  return ci::Ret(ci::Release(ptr, device));
}

}  // namespace

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (devPtr != nullptr && size == 0) {
    *devPtr = nullptr;
    return cudaSuccess;
  }
  {
    std::unique_lock lock(ci::Mu());
    if (const cudaError_t e = ci::CheckUnsafeCallLocked(); e != cudaSuccess) return ci::Ret(e);
  }
  return MallocDevice(devPtr, size);
}

cudaError_t cudaFree(void* devPtr) {
  if (devPtr == nullptr) return ci::CheckSticky();
  return SyncAndRelease(devPtr, true);
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  {
    std::unique_lock lock(ci::Mu());
    CUstream_st* s = nullptr;
    if (const cudaError_t e = ci::ResolveLocked(hStream, &s); e != cudaSuccess) {
      return ci::Ret(e);
    }
    // Graph memory nodes are not modelled: an allocation inside a capture is refused.
    if (s->capture != nullptr) {
      ci::InvalidateLocked(*s->capture, cudaErrorStreamCaptureUnsupported);
      return ci::Ret(cudaErrorStreamCaptureUnsupported);
    }
  }
  if (devPtr != nullptr && size == 0) {
    *devPtr = nullptr;
    return cudaSuccess;
  }
  return MallocDevice(devPtr, size);
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  const std::optional<cc::Allocation> a = cc::FindAllocation(devPtr);
  if (devPtr == nullptr) return cudaSuccess;
  if (!a.has_value() || a->base != devPtr || !a->device) return ci::Ret(cudaErrorInvalidValue);
  std::unique_lock lock(ci::Mu());
  CUstream_st* s = nullptr;
  if (const cudaError_t e = ci::ResolveLocked(hStream, &s); e != cudaSuccess) return ci::Ret(e);
  if (s->capture != nullptr) {
    ci::InvalidateLocked(*s->capture, cudaErrorStreamCaptureUnsupported);
    return ci::Ret(cudaErrorStreamCaptureUnsupported);
  }
  return ci::Ret(ci::SubmitLocked(s, "cudaFreeAsync", [devPtr] {
    ci::Release(devPtr, true);
    return cudaSuccess;
  }));
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  if (pHost == nullptr || (flags & ~0x7u) != 0) return ci::Ret(cudaErrorInvalidValue);
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  {
    std::unique_lock lock(ci::Mu());
    if (const cudaError_t e = ci::CheckUnsafeCallLocked(); e != cudaSuccess) return ci::Ret(e);
  }
  return ci::Ret(ci::Allocate(size, false, cc::CurrentDevice(), pHost));
}

cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  if (pDevice == nullptr || flags != 0) return ci::Ret(cudaErrorInvalidValue);
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  const std::optional<cc::Allocation> a = cc::FindAllocation(pHost);
  if (!a.has_value() || a->device) return ci::Ret(cudaErrorInvalidValue);
  *pDevice = pHost;  // unified addressing: the device sees mapped memory where the host does
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return ci::CheckSticky();
  return SyncAndRelease(ptr, false);
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return ci::Ret(cudaErrorInvalidValue);
  if (const cudaError_t sticky = ci::CheckSticky(); sticky != cudaSuccess) return sticky;
  *total = ci::MemoryCap();
  *free = *total - ci::DeviceBytesInUse(cc::CurrentDevice());
  return cudaSuccess;
}
