// What this process costs, read from the kernel: its threads, its resident memory and
// its CPU time. For tests that bound a server's threads and for the streaming benches.
//
// Thread safety: each function reads the kernel's current figures; callable anywhere.
#ifndef LOCKSTEP_RUNTIME_TESTING_PROCESS_STATS_H_
#define LOCKSTEP_RUNTIME_TESTING_PROCESS_STATS_H_

#include <cstdint>

namespace lockstep::process {

// This process's threads as the kernel lists them (/proc/self/task); -1 when unreadable.
int ThreadCount();

// This process's resident set in KiB (VmRSS of /proc/self/status); -1 when unreadable.
int64_t RssKib();

// CPU time this process has used, user and system, in seconds (getrusage).
double CpuSeconds();

}  // namespace lockstep::process

#endif  // LOCKSTEP_RUNTIME_TESTING_PROCESS_STATS_H_
