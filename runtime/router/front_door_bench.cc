// front_door_bench: many concurrent streaming completions through one running router,
// all from one client thread (epoll), so the load generator adds no thread per stream.
// Reports errors, time to first token and the gaps between tokens as the client sees
// them (an SSE event carries one token or a few), and, for the router process given by --pid, its threads and RSS (the largest
// seen, sampled every 100 ms) and the CPU it used per streamed token (its utime + stime
// over the run, from /proc: the client's CPU is not in it).
//
//   front_door_bench --http 127.0.0.1:8000 --streams 5000 --max-tokens 20 --pid 1234
//
// With --grpc LEADER (an instance leader's WorkerService address; the cluster token from
// LOCKSTEP_CLUSTER_TOKEN_FILE), the same streams then run again straight on the leader
// (front_door_direct.h), and the bench prints both runs' first-token and between-token
// percentiles and their differences: the latency the router adds. Both runs send the
// same prompt (token ids) and sampling, so the fake engine paces them alike. Each run
// also states the bench's own CPU time, to tell it apart from the router's.
//
// Exit status 0 when every stream completed (200, every token, [DONE]).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "runtime/router/front_door_direct.h"

namespace lockstep::router {
namespace {

struct Stream {
  int fd = -1;
  std::string request;
  size_t written = 0;
  std::string in;
  size_t scanned = 0;  // of `in`, searched for events
  bool head_ok = false;
  absl::Time sent, first, last;
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

// This process's CPU time (all its threads), in seconds.
double OwnCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// The prompt of every stream, as token ids, in both runs.
constexpr int kPromptTokenIds[] = {11, 12, 13, 14, 15, 16, 17, 18};

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
      s.first = now;
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

struct HttpRun {
  int completed = 0;
  std::vector<double> ttft, gaps;
  std::vector<double> per_token;  // as DirectResult::per_token_ms
};

HttpRun RunHttp(const std::string& http, const std::string& model, int streams, int max_tokens,
                int pid, absl::Duration timeout);

int Run(const std::string& http, const std::string& grpc, const std::string& model, int streams,
        int max_tokens, int pid, absl::Duration timeout) {
  if (const absl::StatusOr<HostPort> address = ParseHostPort(http); !address.ok()) {
    std::fprintf(stderr, "--http: %s\n", std::string(address.status().message()).c_str());
    return 2;
  }
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  const HttpRun routed = RunHttp(http, model, streams, max_tokens, pid, timeout);
  if (grpc.empty()) return routed.completed == streams ? 0 : 1;
  const double cpu_before = OwnCpuSeconds();
  const double router_cpu_before = pid > 0 ? CpuSeconds(pid) : 0;
  const DirectResult direct =
      RunDirect({.worker = grpc,
                 .model = model,
                 .prompt_token_ids = std::vector<int>(std::begin(kPromptTokenIds),
                                                      std::end(kPromptTokenIds)),
                 .streams = streams,
                 .max_tokens = max_tokens,
                 .timeout = timeout});
  std::printf("direct on %s: streams %d, completed %d, responses %ld, wall %.2f s, bench CPU "
              "%.2f s, router CPU %.2f s\n",
              grpc.c_str(), streams, direct.completed, direct.responses, direct.wall_s,
              OwnCpuSeconds() - cpu_before, pid > 0 ? CpuSeconds(pid) - router_cpu_before : 0.0);
  for (const auto& [what, count] : direct.errors) {
    std::printf("  error '%s': %d\n", what.c_str(), count);
  }
  std::printf("direct: first tokens ms p50 %.2f p99 %.2f; between responses ms p50 %.2f p99 "
              "%.2f; per token ms p50 %.3f p99 %.3f\n",
              Percentile(direct.first_ms, 0.5), Percentile(direct.first_ms, 0.99),
              Percentile(direct.gap_ms, 0.5), Percentile(direct.gap_ms, 0.99),
              Percentile(direct.per_token_ms, 0.5), Percentile(direct.per_token_ms, 0.99));
  // Differences of percentiles (the runs' tokens cannot be paired one to one).
  std::printf("added by the router (routed - direct), ms: first token p50 %+.2f p99 %+.2f; "
              "between events p50 %+.2f p99 %+.2f; per token p50 %+.3f p99 %+.3f\n",
              Percentile(routed.ttft, 0.5) - Percentile(direct.first_ms, 0.5),
              Percentile(routed.ttft, 0.99) - Percentile(direct.first_ms, 0.99),
              Percentile(routed.gaps, 0.5) - Percentile(direct.gap_ms, 0.5),
              Percentile(routed.gaps, 0.99) - Percentile(direct.gap_ms, 0.99),
              Percentile(routed.per_token, 0.5) - Percentile(direct.per_token_ms, 0.5),
              Percentile(routed.per_token, 0.99) - Percentile(direct.per_token_ms, 0.99));
  return routed.completed == streams && direct.completed == streams ? 0 : 1;
}

HttpRun RunHttp(const std::string& http, const std::string& model, int streams, int max_tokens,
                int pid, absl::Duration timeout) {
  const absl::StatusOr<HostPort> address = ParseHostPort(http);
  std::string prompt;
  for (int id : kPromptTokenIds) absl::StrAppend(&prompt, prompt.empty() ? "" : ",", id);
  const std::string body =
      absl::StrCat(R"({"model":")", model, R"(","prompt":[)", prompt,
                   R"(],"stream":true,"ignore_eos":true,"max_tokens":)", max_tokens, "}");
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
  const double own_cpu_before = OwnCpuSeconds();
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
  const double own_cpu = OwnCpuSeconds() - own_cpu_before;
  std::map<std::string, int> errors;
  int64_t received = 0;
  int completed = 0;
  std::vector<double> per_token;
  for (Stream& s : all) {
    received += s.events;
    if (s.fd >= 0) s.error = "timed out";
    if (s.error.empty()) {
      ++completed;
      if (max_tokens > 1) {
        per_token.push_back(absl::ToDoubleMilliseconds(s.last - s.first) / (max_tokens - 1));
      }
    } else {
      ++errors[s.error];
    }
  }
  std::printf("streams %d, completed %d, events %ld (%d tokens each stream), wall %.2f s, "
              "bench CPU %.2f s\n",
              streams, completed, received, max_tokens, wall, own_cpu);
  for (const auto& [what, count] : errors) std::printf("  error '%s': %d\n", what.c_str(), count);
  std::printf("first event ms p50 %.1f p99 %.1f; between events ms p50 %.2f p99 %.2f; per "
              "token ms p50 %.3f p99 %.3f\n",
              Percentile(ttft, 0.5), Percentile(ttft, 0.99), Percentile(gaps, 0.5),
              Percentile(gaps, 0.99), Percentile(per_token, 0.5), Percentile(per_token, 0.99));
  if (pid > 0) {
    const double tokens = static_cast<double>(completed) * max_tokens;
    std::printf("router: threads max %ld, RSS max %.0f MB, CPU %.2f s (%.1f us per token)\n",
                peak.threads, peak.rss_kb / 1024.0, cpu, tokens > 0 ? cpu * 1e6 / tokens : 0.0);
  }
  return {.completed = completed,
          .ttft = std::move(ttft),
          .gaps = std::move(gaps),
          .per_token = std::move(per_token)};
}

}  // namespace
}  // namespace lockstep::router

int main(int argc, char** argv) {
  std::string http, grpc, model = "tiny-moe";
  int streams = 1000, max_tokens = 20, pid = 0, timeout_s = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    bool ok = true;
    if (flag == "--http") {
      http = value;
    } else if (flag == "--grpc") {
      grpc = value;
    } else if (flag == "--model") {
      model = value;
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
                 "[--pid ROUTER_PID] [--timeout-s S] [--grpc LEADER_HOST:PORT] [--model M]\n");
    return 2;
  }
  return lockstep::router::Run(http, grpc, model, streams, max_tokens, pid,
                               absl::Seconds(timeout_s));
}
