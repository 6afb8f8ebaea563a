// The CPU execution layer's SIGSEGV report, as compute-sanitizer names a bad access: a
// kernel (or host) access that faults on a guard page, a freed allocation's quarantine
// or elsewhere prints which allocation is nearest the faulting address and where the
// address lies against it ("32 bytes past the end of the 1000-byte device allocation at
// 0x..., in its guard page"; "offset 8 of the freed ... : a use after free"), and the
// kernel thread that faulted when one did, then the fault goes on to the handler that
// was there before (by default: the process dies of SIGSEGV).
//
// The first allocation installs the handler (once per process). Thread safety: every
// function may be called from any thread; the handler reads the allocation registry
// only if it can lock it without waiting (a fault while the registry is locked reports
// no allocation).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_SEGV_HANDLER_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_SEGV_HANDLER_H_

#include <cstddef>

namespace lockstep::cuda_cpu::internal {

// Installs the SIGSEGV handler (and SIGBUS), keeping the previous actions; idempotent.
void InstallSegvHandler();

// Writes where `address` lies against the nearest allocation (live or quarantined)
// into buf (NUL-terminated, at most size bytes); returns its length. No allocation of
// memory (the handler calls it). In memory.cc, which owns the registry.
size_t DescribeAddress(const void* address, char* buf, size_t size);

// Writes " in kernel K block (x,y,z) thread (x,y,z)" for the kernel thread running on
// the calling OS thread into buf (or nothing outside kernels); returns its length.
// The kernel library registers it.
using FaultContext = size_t (*)(char* buf, size_t size);
void SetFaultContext(FaultContext context);

}  // namespace lockstep::cuda_cpu::internal

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_SEGV_HANDLER_H_
