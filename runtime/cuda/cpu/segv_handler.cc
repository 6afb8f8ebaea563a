#include "runtime/cuda/cpu/segv_handler.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

namespace lockstep::cuda_cpu::internal {
namespace {

std::atomic<FaultContext> g_context{nullptr};
struct sigaction g_previous_segv;
struct sigaction g_previous_bus;

void OnFault(int signal, siginfo_t* info, void* /*ucontext*/) {
  char text[1024];
  size_t n = static_cast<size_t>(std::snprintf(
      text, sizeof(text), "CUDA CPU layer: %s at address %p",
      signal == SIGBUS ? "SIGBUS" : "SIGSEGV", info->si_addr));
  if (const FaultContext context = g_context.load(); context != nullptr && n < sizeof(text)) {
    n += context(text + n, sizeof(text) - n);
  }
  if (n + 2 < sizeof(text)) {
    text[n++] = ':';
    text[n++] = ' ';
    n += DescribeAddress(info->si_addr, text + n, sizeof(text) - n);
  }
  if (n + 1 < sizeof(text)) text[n++] = '\n';
  ssize_t written = write(STDERR_FILENO, text, n);
  (void)written;
  // The access repeats when this returns: under the previous handler now.
  sigaction(signal, signal == SIGBUS ? &g_previous_bus : &g_previous_segv, nullptr);
}

}  // namespace

void InstallSegvHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action = {};
    action.sa_sigaction = OnFault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
  });
}

void SetFaultContext(FaultContext context) { g_context.store(context); }

}  // namespace lockstep::cuda_cpu::internal
