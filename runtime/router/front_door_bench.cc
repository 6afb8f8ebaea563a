// front_door_bench: many concurrent streaming completions through one running router,
// all from one client thread (epoll), so the load generator adds no thread per stream.
// Reports errors, time to first token and the gaps between tokens as the client sees
// them (an SSE event carries one token or a few), and, for the router process given by --pid, its threads and RSS (the largest
// seen, sampled every 100 ms) and the CPU it used per streamed token (its utime + stime
// over the run, from /proc: the client's CPU is not in it).
//
//   front_door_bench --http 127.0.0.1:8000 --streams 5000 --max-tokens 20 --pid 1234
//
// Exit status 0 when every stream completed (200, every token, [DONE]).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/host_port.h"

namespace lockstep::router {
namespace {

struct Stream {
  int fd = -1;
  std::string request;
  size_t written = 0;
  std::string in;
  size_t scanned = 0;  // of `in`, searched for events
  bool head_ok = false;
  absl::Time sent, last;
  int events = 0;         // SSE events with text (a token or a few)
  bool finished = false;  // an event said finish_reason "length"
  std::string error;  // empty while fine
  bool done = false;
};

struct ProcSample {
  int64_t threads = 0;
  int64_t rss_kb = 0;
};

ProcSample SampleProc(int pid) {
  ProcSample sample;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (status >> key) {
    if (key == "Threads:") status >> sample.threads;
    if (key == "VmRSS:") status >> sample.rss_kb;
  }
  return sample;
}

// utime + stime of `pid`, in seconds.
double CpuSeconds(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<std::string> fields;
  std::string field;
  for (size_t i = paren + 2; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ' ') {
      fields.push_back(field);
      field.clear();
    } else {
      field += line[i];
    }
  }
  // Fields after the name start at state (3): utime is 14, stime 15.
  double utime = 0, stime = 0;
  if (fields.size() > 13) {
    (void)absl::SimpleAtod(fields[11], &utime);
    (void)absl::SimpleAtod(fields[12], &stime);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

// New events in `s.in`: each "data: " line is a token event, but the last ("[DONE]").
void Scan(Stream& s, absl::Time now, std::vector<double>& ttft, std::vector<double>& gaps) {
  if (!s.head_ok) {
    const size_t head = s.in.find("\r\n\r\n");
    if (head == std::string::npos) return;
    if (s.in.compare(0, 12, "HTTP/1.1 200") != 0) {
      s.error = s.in.substr(0, 12);
      return;
    }
    s.head_ok = true;
    s.scanned = head + 4;
  }
  for (;;) {
    const size_t at = s.in.find("data: ", s.scanned);
    if (at == std::string::npos || s.in.find("\n\n", at) == std::string::npos) break;
    s.scanned = s.in.find("\n\n", at) + 2;
    if (s.in.compare(at + 6, 6, "[DONE]") == 0) {
      s.done = true;
      return;
    }
    if (s.in.compare(at + 6, 9, "{\"error\":") == 0) {
      s.error = "error event";
      return;
    }
    const std::string_view event(s.in.data() + at, s.scanned - at);
    if (event.find("\"finish_reason\":\"length\"") != std::string_view::npos) s.finished = true;
    if (s.events++ == 0) {
      ttft.push_back(absl::ToDoubleMilliseconds(now - s.sent));
    } else {
      gaps.push_back(absl::ToDoubleMilliseconds(now - s.last));
    }
    s.last = now;
  }
  if (s.scanned > 4096) {  // keep the buffer small
    s.in.erase(0, s.scanned);
    s.scanned = 0;
  }
}

int Run(const std::string& http, int streams, int max_tokens, int pid, absl::Duration timeout) {
  const absl::StatusOr<HostPort> address = ParseHostPort(http);
  if (!address.ok()) {
    std::fprintf(stderr, "--http: %s\n", std::string(address.status().message()).c_str());
    return 2;
  }
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  const std::string body = absl::StrCat(
      R"({"model":"tiny-moe","prompt":"front door","stream":true,"ignore_eos":true,"max_tokens":)",
      max_tokens, "}");
  const std::string request =
      absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: router\r\nContent-Type: "
                   "application/json\r\nContent-Length: ",
                   body.size(), "\r\n\r\n", body);
  const int epoll = epoll_create1(0);
  std::vector<Stream> all(streams);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(address->port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const double cpu_before = pid > 0 ? CpuSeconds(pid) : 0;
  const absl::Time start = absl::Now();
  int open = 0;
  for (int i = 0; i < streams; ++i) {
    Stream& s = all[i];
    s.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (s.fd < 0) {
      s.error = "socket";
      continue;
    }
    const int one = 1;
    setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    connect(s.fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    s.request = request;
    s.sent = absl::Now();
    epoll_event event{.events = EPOLLIN | EPOLLOUT, .data = {.u32 = static_cast<uint32_t>(i)}};
    epoll_ctl(epoll, EPOLL_CTL_ADD, s.fd, &event);
    ++open;
  }
  std::vector<double> ttft, gaps;
  ProcSample peak;
  absl::Time next_sample = start;
  std::vector<epoll_event> events(1024);
  char buffer[65536];
  while (open > 0 && absl::Now() - start < timeout) {
    const int n = epoll_wait(epoll, events.data(), static_cast<int>(events.size()), 100);
    const absl::Time now = absl::Now();
    for (int e = 0; e < n; ++e) {
      Stream& s = all[events[e].data.u32];
      if (s.fd < 0) continue;
      if ((events[e].events & EPOLLOUT) && s.written < s.request.size()) {
        const ssize_t w = send(s.fd, s.request.data() + s.written, s.request.size() - s.written,
                               MSG_NOSIGNAL);
        if (w > 0) s.written += static_cast<size_t>(w);
        if (s.written == s.request.size()) {
          epoll_event event{.events = EPOLLIN, .data = events[e].data};
          epoll_ctl(epoll, EPOLL_CTL_MOD, s.fd, &event);
        }
      }
      bool closed = false;
      std::string why = "closed early";  // by the peer (EOF), or the socket's error
      if (events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        const ssize_t r = recv(s.fd, buffer, sizeof(buffer), 0);
        if (r > 0) {
          s.in.append(buffer, static_cast<size_t>(r));
          Scan(s, now, ttft, gaps);
        } else if (r == 0 || errno != EAGAIN) {
          closed = true;
          if (r < 0) {
            why = absl::StrCat("closed early: ", strerrorname_np(errno),
                               s.written == 0 ? " (before the request was sent)" : "");
          } else if (s.in.empty()) {
            why = "closed early: EOF before any response byte";
          }
        }
      }
      if (s.done || closed || !s.error.empty()) {
        if (!s.done && s.error.empty()) s.error = why;
        if (s.done && !s.finished) s.error = "no finish_reason length";
        close(s.fd);
        s.fd = -1;
        --open;
      }
    }
    if (pid > 0 && now >= next_sample) {
      const ProcSample sample = SampleProc(pid);
      peak.threads = std::max(peak.threads, sample.threads);
      peak.rss_kb = std::max(peak.rss_kb, sample.rss_kb);
      next_sample = now + absl::Milliseconds(100);
    }
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu = pid > 0 ? CpuSeconds(pid) - cpu_before : 0;
  std::map<std::string, int> errors;
  int64_t received = 0;
  int completed = 0;
  for (Stream& s : all) {
    received += s.events;
    if (s.fd >= 0) s.error = "timed out";
    if (s.error.empty()) {
      ++completed;
    } else {
      ++errors[s.error];
    }
  }
  std::printf("streams %d, completed %d, events %ld (%d tokens each stream), wall %.2f s\n",
              streams, completed, received, max_tokens, wall);
  for (const auto& [what, count] : errors) std::printf("  error '%s': %d\n", what.c_str(), count);
  std::printf("first event ms p50 %.1f p99 %.1f; between events ms p50 %.2f p99 %.2f\n",
              Percentile(ttft, 0.5), Percentile(ttft, 0.99), Percentile(gaps, 0.5),
              Percentile(gaps, 0.99));
  if (pid > 0) {
    const double tokens = static_cast<double>(completed) * max_tokens;
    std::printf("router: threads max %ld, RSS max %.0f MB, CPU %.2f s (%.1f us per token)\n",
                peak.threads, peak.rss_kb / 1024.0, cpu, tokens > 0 ? cpu * 1e6 / tokens : 0.0);
  }
  return completed == streams ? 0 : 1;
}

}  // namespace
}  // namespace lockstep::router

int main(int argc, char** argv) {
  std::string http;
  int streams = 1000, max_tokens = 20, pid = 0, timeout_s = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    bool ok = true;
    if (flag == "--http") {
      http = value;
    } else if (flag == "--streams") {
      ok = absl::SimpleAtoi(value, &streams) && streams > 0;
    } else if (flag == "--max-tokens") {
      ok = absl::SimpleAtoi(value, &max_tokens) && max_tokens > 0;
    } else if (flag == "--pid") {
      ok = absl::SimpleAtoi(value, &pid);
    } else if (flag == "--timeout-s") {
      ok = absl::SimpleAtoi(value, &timeout_s) && timeout_s > 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "front_door_bench: bad flag %s %s\n", flag.c_str(), value.c_str());
      return 2;
    }
  }
  if (http.empty()) {
    std::fprintf(stderr,
                 "usage: front_door_bench --http HOST:PORT [--streams N] [--max-tokens T] "
                 "[--pid ROUTER_PID] [--timeout-s S]\n");
    return 2;
  }
  return lockstep::router::Run(http, streams, max_tokens, pid, absl::Seconds(timeout_s));
}
