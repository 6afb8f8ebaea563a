// Many concurrent server-sent-event streams through one AsyncHttpServer: N clients (one
// thread polling all their sockets) each POST a request; the handler starts a stream
// and holds it; then every step writes one event to every stream (as a router does for
// a decode step), and the bench waits until every client has it. It prints the
// process's threads (/proc/self/task), RSS, the step delivery time and the CPU time
// per event (server and clients together: they share the process).
//
//   bazel run //runtime/async_http:sse_streams_bench -- 5000 50
//   (streams, steps)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/async_http/async_http_server.h"
#include "runtime/testing/process_stats.h"

namespace lockstep::async_http {
namespace {

using ::lockstep::process::CpuSeconds;
using ::lockstep::process::RssKib;
using ::lockstep::process::ThreadCount;

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

// Reads every client socket until each has seen `marker` `count` times in total.
bool ReadUntil(std::vector<int>& fds, std::vector<int>& seen, const std::string& marker,
               int count) {
  std::vector<pollfd> polls;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  char buf[65536];
  while (absl::Now() < deadline) {
    polls.clear();
    for (size_t i = 0; i < fds.size(); ++i) {
      if (seen[i] < count) polls.push_back({fds[i], POLLIN, static_cast<short>(i & 0x7fff)});
    }
    if (polls.empty()) return true;
    std::vector<size_t> index;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (seen[i] < count) index.push_back(i);
    }
    if (poll(polls.data(), polls.size(), 1000) < 0) return false;
    for (size_t k = 0; k < polls.size(); ++k) {
      if ((polls[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = recv(fds[index[k]], buf, sizeof(buf), 0);
      if (n <= 0) return false;
      std::string_view got(buf, static_cast<size_t>(n));
      for (size_t at = got.find(marker); at != std::string_view::npos;
           at = got.find(marker, at + 1)) {
        ++seen[index[k]];
      }
    }
  }
  return false;
}

int Run(int streams, int steps) {
  absl::Mutex mu;
  std::vector<std::shared_ptr<HttpExchange>> open;
  AsyncHttpLimits limits;
  limits.max_connections = streams + 16;
  limits.idle_timeout = absl::Minutes(5);
  limits.write_timeout = absl::Minutes(5);
  AsyncHttpServer server(limits, [&](std::shared_ptr<HttpExchange> exchange) {
    exchange->StartStream(200, "text/event-stream");
    exchange->Write("event: open\n\n");
    absl::MutexLock lock(&mu);
    open.push_back(std::move(exchange));
  });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "%s\n", port.status().ToString().c_str());
    return 1;
  }
  const int threads_idle = ThreadCount();
  const int64_t rss_idle = RssKib();
  std::vector<int> fds;
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: "
      "2\r\n\r\n{}";
  for (int i = 0; i < streams; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(*port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(request.size())) {
      std::fprintf(stderr, "client %d could not connect (open files?)\n", i);
      return 1;
    }
    fds.push_back(fd);
  }
  std::vector<int> opened(streams, 0), events(streams, 0);
  if (!ReadUntil(fds, opened, "event: open", 1)) {
    std::fprintf(stderr, "streams did not open\n");
    return 1;
  }
  const int threads_open = ThreadCount();
  std::vector<std::shared_ptr<HttpExchange>> exchanges;
  {
    absl::MutexLock lock(&mu);
    exchanges = open;
  }
  const double cpu_start = CpuSeconds();
  std::vector<double> step_ms;
  for (int step = 0; step < steps; ++step) {
    const absl::Time start = absl::Now();
    for (auto& e : exchanges) e->Write("data: {\"choices\":[{\"text\":\" token\"}]}\n\n");
    if (!ReadUntil(fds, events, "data: ", step + 1)) {
      std::fprintf(stderr, "step %d was not delivered\n", step);
      return 1;
    }
    step_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  const double cpu = CpuSeconds() - cpu_start;
  std::printf(
      "streams=%d steps=%d io_threads=%d threads idle=%d open=%d rss_kib idle=%lld "
      "streaming=%lld step_delivery_ms p50=%.2f p99=%.2f max=%.2f cpu_us_per_event=%.2f\n",
      streams, steps, limits.io_threads, threads_idle, threads_open,
      static_cast<long long>(rss_idle), static_cast<long long>(RssKib()),
      Percentile(step_ms, 0.5), Percentile(step_ms, 0.99), Percentile(step_ms, 1.0),
      1e6 * cpu / (static_cast<double>(streams) * steps));
  for (auto& e : exchanges) e->End();
  for (int fd : fds) close(fd);
  return 0;
}

}  // namespace
}  // namespace lockstep::async_http

int main(int argc, char** argv) {
  const int streams = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 50;
  if (streams <= 0 || steps <= 0) {
    std::fprintf(stderr, "usage: sse_streams_bench [streams > 0] [steps > 0]\n");
    return 2;
  }
  return lockstep::async_http::Run(streams, steps);
}
