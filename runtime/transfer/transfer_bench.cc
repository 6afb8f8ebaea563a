// transfer_bench: KV transfer throughput between two processes over loopback — a
// context rank (a child process, forked before any gRPC object exists) and a
// generation rank (this process) — through GrpcTransceiver, over its TCP data plane
// (BM_DataPlane, the default), over UCX (BM_Ucx: one-sided gets, on the transports
// UCX_TLS names, e.g. UCX_TLS=shm,self or tcp,self) and over gRPC only
// (BM_GrpcTransfer), and UCX against the data plane in alternating bursts
// (BM_UcxPaired: both from the same moments of the machine), against a raw TCP
// stream of the same bytes (the same blocks, read from the same slab and received
// straight into the same destination blocks with readv) measured in the same run.
//
//   bazel run -c opt //runtime/transfer:transfer_bench
//   (defaults: --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true)
//
// The request is tiny-moe shaped: 32 KiB target blocks (4 layers x 2 KV heads x 16
// tokens x 32 dims, f32) and 8 KiB draft blocks (1 layer), 64 or 256 blocks per pool
// (2.5 or 10 MiB). Every series is checked bit-exact once after it is timed. Besides
// throughput, each series reports the CPU time both processes spent per GB moved
// (getrusage), which a loaded host disturbs less than wall time. The last lines print
// the data plane / raw TCP and gRPC / raw TCP ratios of the medians.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"
#include "common/hash.h"
#include "kvcache/block_copier.h"
#include "runtime/transfer/crc32c.h"
#include "runtime/transfer/grpc_transceiver.h"

namespace lockstep::transfer {
namespace {

constexpr int32_t kPoolBlocks = 512;
constexpr uint64_t kFillSeed = 20261129;
constexpr int64_t kTokensPerBlock = 16;

KvDescriptor TinyMoe() {
  KvDescriptor d;
  d.model = "tiny-moe";
  d.target = kv::BlockLayout{
      .num_layers = 4, .num_kv_heads = 2, .head_dim = 32, .tokens_per_block = kTokensPerBlock};
  d.draft = kv::BlockLayout{
      .num_layers = 1, .num_kv_heads = 2, .head_dim = 32, .tokens_per_block = kTokensPerBlock};
  return d;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "transfer_bench: %s\n", what.c_str());
  std::exit(1);
}

// A rank's KV: both pools, and the block table every request of this run uses.
struct Kv {
  explicit Kv(uint64_t table_seed, bool fill) {
    const KvDescriptor d = TinyMoe();
    target.resize(kPoolBlocks * d.target->BlockElements());
    draft.resize(kPoolBlocks * d.draft->BlockElements());
    if (fill) {  // splitmix64 of the position: cheap, and the same in both processes
      uint64_t x = kFillSeed;
      for (std::vector<float>* slab : {&target, &draft}) {
        for (float& f : *slab) {
          f = static_cast<float>(SplitMix64(x) >> 40);
          x += kSplitMix64Gamma;
        }
      }
    }
    std::mt19937_64 rng(table_seed);
    for (std::vector<BlockId>* table : {&target_table, &draft_table}) {
      std::vector<int32_t> ids(kPoolBlocks);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int32_t id : ids) table->emplace_back(id);
    }
  }

  // The transfer reaches the pools through host copiers, as a worker's does.
  KvCopiers copiers() {
    const KvDescriptor d = TinyMoe();
    target_copier = std::make_unique<kv::HostBlockCopier>(
        reinterpret_cast<std::byte*>(target.data()), *d.target, kPoolBlocks);
    draft_copier = std::make_unique<kv::HostBlockCopier>(
        reinterpret_cast<std::byte*>(draft.data()), *d.draft, kPoolBlocks);
    return {target_copier.get(), draft_copier.get()};
  }

  kv::BlockRefs Blocks(int64_t id, int64_t blocks) const {
    kv::BlockRefs b;
    b.id = RequestId(id);
    b.generation = 1;
    b.draft_generation = 1;
    b.blocks.assign(target_table.begin(), target_table.begin() + blocks);
    b.draft_blocks.assign(draft_table.begin(), draft_table.begin() + blocks);
    return b;
  }

  // The moved blocks in stream order (target, then draft) as iovecs.
  std::vector<iovec> Iovecs(int64_t blocks) {
    const KvDescriptor d = TinyMoe();
    std::vector<iovec> out;
    for (int64_t i = 0; i < blocks; ++i) {
      out.push_back({target.data() + target_table[i].value() * d.target->BlockElements(),
                     d.target->BlockBytes()});
    }
    for (int64_t i = 0; i < blocks; ++i) {
      out.push_back(
          {draft.data() + draft_table[i].value() * d.draft->BlockElements(), d.draft->BlockBytes()});
    }
    return out;
  }

  std::vector<float> target, draft;
  std::unique_ptr<kv::HostBlockCopier> target_copier, draft_copier;
  std::vector<BlockId> target_table, draft_table;
};

int64_t RequestBytes(int64_t blocks) {
  const KvDescriptor d = TinyMoe();
  return blocks * static_cast<int64_t>(d.target->BlockBytes() + d.draft->BlockBytes());
}

bool ReadFull(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Moves all of `iov` through readv or writev, resuming after partial transfers.
bool TransferIov(int fd, std::vector<iovec> iov, bool reading) {
  size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = reading ? readv(fd, &iov[first], count) : writev(fd, &iov[first], count);
    if (n <= 0) return false;
    size_t left = static_cast<size_t>(n);
    while (left > 0 && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return true;
}

// CPU time (user + system, all threads) this process has used.
int64_t CpuNanos() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1'000'000'000ll +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1'000ll;
}

// What the generation process asks the context process over the command pipe.
struct Command {
  int64_t op = 0;  // 1: offer a claim (reply 1 / 0), 2: quit, 3: report CpuNanos()
  int64_t id = 0;
  int64_t blocks = 0;
};

// The context process: a GrpcTransceiver and a raw TCP server over the same slab.
int RunContext(int commands, int replies, size_t chunk_bytes) {
  Kv kv(/*table_seed=*/1, /*fill=*/true);
  GrpcTransceiverOptions options;
  options.name = "ctx bench";
  options.descriptor = TinyMoe();
  options.copiers = kv.copiers();
  options.server.chunk_bytes = chunk_bytes;
  options.ucx = true;  // offered only to pullers that ask over UCX
  absl::StatusOr<std::unique_ptr<GrpcTransceiver>> ctx =
      GrpcTransceiver::Create(options, SystemClock::Get());
  if (!ctx.ok()) Die(ctx.status().ToString());

  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Die("raw TCP listen failed");
  }
  std::thread raw([&] {  // one connection; each 8-byte request gets the blocks' bytes
    const int fd = accept(listener, nullptr, nullptr);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int64_t blocks = 0;
    while (ReadFull(fd, &blocks, sizeof(blocks)) && blocks > 0) {
      if (!TransferIov(fd, kv.Iovecs(blocks), /*reading=*/false)) break;
    }
    close(fd);
  });
  const std::string hello = absl::StrCat((*ctx)->address(), " ", ntohs(addr.sin_port), "\n");
  WriteFull(replies, hello.data(), hello.size());
  Command command;
  while (ReadFull(commands, &command, sizeof(command)) && command.op != 2) {
    if (command.op == 3) {
      const int64_t cpu = CpuNanos();
      WriteFull(replies, &cpu, sizeof(cpu));
      continue;
    }
    (*ctx)->Poll();  // ends the finished claims' bookkeeping
    const absl::Status started =
        (*ctx)->StartSend({kv.Blocks(command.id, command.blocks), command.blocks * kTokensPerBlock,
                           SystemClock::Get()->Now() + absl::Minutes(1)});
    const int64_t ok = started.ok() ? 1 : 0;
    WriteFull(replies, &ok, sizeof(ok));
  }
  raw.join();
  close(listener);
  return 0;
}

// The generation process's view of the run.
struct Bench {
  int commands = -1;
  int replies = -1;
  pid_t child = -1;
  std::string grpc_address;
  int raw_fd = -1;
  std::unique_ptr<Kv> kv;
  std::unique_ptr<GrpcTransceiver> gen;       // pulls over the TCP data plane
  std::unique_ptr<GrpcTransceiver> gen_grpc;  // pulls over gRPC
  std::unique_ptr<GrpcTransceiver> gen_ucx;   // pulls over UCX
  int64_t next_id = 1;
};
Bench* bench = nullptr;

// CPU time used so far by both processes.
int64_t BothCpuNanos() {
  const Command command{3, 0, 0};
  int64_t child = 0;
  if (!WriteFull(bench->commands, &command, sizeof(command)) ||
      !ReadFull(bench->replies, &child, sizeof(child))) {
    Die("the context process did not report its CPU time");
  }
  return child + CpuNanos();
}

// Throughput, and CPU milliseconds both processes spent per GB moved.
void Report(benchmark::State& state, int64_t blocks, int64_t cpu_nanos) {
  const double bytes = static_cast<double>(state.iterations() * RequestBytes(blocks));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["cpu_ms_per_GB"] = static_cast<double>(cpu_nanos) / 1e6 / (bytes / 1e9);
}

void CheckBitExact(int64_t blocks, const char* what) {
  const Kv reference(/*table_seed=*/1, /*fill=*/true);
  const KvDescriptor d = TinyMoe();
  for (int64_t i = 0; i < blocks; ++i) {
    const float* want =
        reference.target.data() + reference.target_table[i].value() * d.target->BlockElements();
    const float* got =
        bench->kv->target.data() + bench->kv->target_table[i].value() * d.target->BlockElements();
    const float* want_draft =
        reference.draft.data() + reference.draft_table[i].value() * d.draft->BlockElements();
    const float* got_draft =
        bench->kv->draft.data() + bench->kv->draft_table[i].value() * d.draft->BlockElements();
    if (std::memcmp(want, got, d.target->BlockBytes()) != 0 ||
        std::memcmp(want_draft, got_draft, d.draft->BlockBytes()) != 0) {
      Die(absl::StrCat(what, ": block ", i, " differs after the transfer"));
    }
  }
}

void ClearDestination() {
  std::fill(bench->kv->target.begin(), bench->kv->target.end(), 0.0f);
  std::fill(bench->kv->draft.begin(), bench->kv->draft.end(), 0.0f);
}

// Has the context process claim `blocks` blocks for a new request: its id.
int64_t Claim(int64_t blocks) {
  const int64_t id = bench->next_id++;
  const Command command{1, id, blocks};
  int64_t ok = 0;
  if (!WriteFull(bench->commands, &command, sizeof(command)) ||
      !ReadFull(bench->replies, &ok, sizeof(ok)) || ok != 1) {
    Die("the context process refused a claim");
  }
  return id;
}

// Pulls request `id`'s claimed blocks through `gen` and waits for its event.
void Pull(GrpcTransceiver& gen, int64_t id, int64_t blocks) {
  ReceiveSpec spec;
  spec.blocks = bench->kv->Blocks(id, blocks);
  spec.num_tokens = blocks * kTokensPerBlock;
  spec.source.address = bench->grpc_address;
  spec.source.request_id = RequestId(id);
  spec.deadline = SystemClock::Get()->Now() + absl::Seconds(60);
  if (!gen.StartReceive(spec).ok()) Die("StartReceive failed");
  std::vector<TransferEvent> events;
  while (events.empty()) {
    gen.WaitForEvent(absl::Seconds(60));
    events = gen.Poll();
  }
  if (!events[0].status.ok()) Die(events[0].status.ToString());
}

void Transfer(benchmark::State& state, GrpcTransceiver& gen, const char* what) {
  const int64_t blocks = state.range(0);
  ClearDestination();
  const int64_t cpu = BothCpuNanos();
  for (auto _ : state) {
    state.PauseTiming();
    const int64_t id = Claim(blocks);
    state.ResumeTiming();
    Pull(gen, id, blocks);
  }
  Report(state, blocks, BothCpuNanos() - cpu);
  CheckBitExact(blocks, what);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The TCP data plane and UCX in alternating bursts of range(1) pulls each, alternating
// which goes first, so that both see the same moments of a shared machine (whose speed
// drifts between two series run one after the other). A pull's work left over after its
// event (the offer's release, a reaper's wake-up) lands in the next pull's time: within a
// burst on the same transport, as in a series; after a burst's last pull, on the other
// transport, so bursts of 1 flatter the faster one and longer bursts approach two series'
// throughput. An iteration is one burst of each; the counters are each transport's median
// burst time per pull (us), the ratio of those medians (data plane / UCX: UCX's
// speed-up) and the share of burst pairs UCX won.
void BM_UcxPaired(benchmark::State& state) {
  const int64_t blocks = state.range(0);
  const int64_t burst = state.range(1);
  ClearDestination();
  std::vector<double> data_plane_us;
  std::vector<double> ucx_us;
  int64_t ucx_won = 0;
  bool ucx_first = false;
  for (auto _ : state) {
    double pair_us[2] = {0, 0};  // data plane, UCX: the burst's time per pull
    for (int k = 0; k < 2; ++k) {
      const bool ucx = (k == 0) == ucx_first;
      absl::Duration spent;
      for (int64_t i = 0; i < burst; ++i) {
        state.PauseTiming();
        const int64_t id = Claim(blocks);
        state.ResumeTiming();
        const absl::Time start = absl::Now();
        Pull(ucx ? *bench->gen_ucx : *bench->gen, id, blocks);
        spent += absl::Now() - start;
      }
      pair_us[ucx ? 1 : 0] = absl::ToDoubleMicroseconds(spent) / static_cast<double>(burst);
    }
    data_plane_us.push_back(pair_us[0]);
    ucx_us.push_back(pair_us[1]);
    if (pair_us[1] < pair_us[0]) ++ucx_won;
    ucx_first = !ucx_first;
  }
  const double data_plane = Median(data_plane_us);
  const double ucx = Median(ucx_us);
  state.counters["data_plane_us"] = data_plane;
  state.counters["ucx_us"] = ucx;
  state.counters["ucx_speedup"] = ucx > 0 ? data_plane / ucx : 0;
  state.counters["ucx_won"] =
      ucx_us.empty() ? 0 : static_cast<double>(ucx_won) / static_cast<double>(ucx_us.size());
  // Both wrote the same blocks; the last pull is checked.
  CheckBitExact(blocks, ucx_first ? "paired (UCX last)" : "paired (data plane last)");
}

void BM_DataPlane(benchmark::State& state) { Transfer(state, *bench->gen, "data plane"); }

void BM_GrpcTransfer(benchmark::State& state) { Transfer(state, *bench->gen_grpc, "gRPC"); }

void BM_Ucx(benchmark::State& state) { Transfer(state, *bench->gen_ucx, "UCX"); }

void BM_RawTcp(benchmark::State& state) {
  const int64_t blocks = state.range(0);
  ClearDestination();
  const int64_t cpu = BothCpuNanos();
  for (auto _ : state) {
    if (!WriteFull(bench->raw_fd, &blocks, sizeof(blocks)) ||
        !TransferIov(bench->raw_fd, bench->kv->Iovecs(blocks), /*reading=*/true)) {
      Die("raw TCP transfer failed");
    }
  }
  Report(state, blocks, BothCpuNanos() - cpu);
  CheckBitExact(blocks, "raw TCP");
}

// One block's CRC32C on one path (range(0): a Crc32cPath this CPU has).
void BM_Crc32c(benchmark::State& state) {
  const auto path = static_cast<Crc32cPath>(state.range(0));
  state.SetLabel(Crc32cPathName(path));
  std::vector<uint8_t> block(TinyMoe().target->BlockBytes());
  std::mt19937_64 rng(1);
  for (uint8_t& b : block) b = static_cast<uint8_t>(rng());
  for (auto _ : state) {
    benchmark::DoNotOptimize(Crc32cExtendWith(path, 0, block.data(), block.size()));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(block.size()));
}

// Remembers the median throughput of every series, to print the ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.aggregate_name != "median") continue;
      for (const char* counter : {"bytes_per_second", "cpu_ms_per_GB"}) {
        auto it = run.counters.find(counter);
        if (it != run.counters.end()) medians_[{run.run_name.str(), counter}] = it->second.value;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // Each transport against raw TCP, per request size: throughput and its ratio, CPU per
  // GB of both processes and the ratio raw / transport (1.0: the same cost).
  void PrintRatios() const {
    for (const char* series : {"BM_DataPlane/", "BM_Ucx/", "BM_GrpcTransfer/"}) {
      PrintRatios(series);
    }
    // UCX against the TCP data plane.
    for (const auto& [key, ucx] : medians_) {
      const auto& [name, counter] = key;
      if (name.rfind("BM_Ucx/", 0) != 0 || counter != "bytes_per_second") continue;
      const std::string size = name.substr(name.find('/') + 1);
      auto tcp = medians_.find({"BM_DataPlane/" + size, counter});
      if (tcp == medians_.end()) continue;
      std::printf("blocks %s: UCX / data plane %.2f\n", size.substr(0, size.find('/')).c_str(),
                  ucx / tcp->second);
    }
  }

 private:
  void PrintRatios(const std::string& series) const {
    const char* label = series == "BM_DataPlane/" ? "data plane"
                        : series == "BM_Ucx/"     ? "UCX"
                                                  : "gRPC";
    for (const auto& [key, grpc] : medians_) {
      const auto& [name, counter] = key;
      if (name.rfind(series, 0) != 0 || counter != "bytes_per_second") continue;
      const std::string size = name.substr(name.find('/') + 1);
      const std::string raw_name = "BM_RawTcp/" + size;
      auto raw = medians_.find({raw_name, counter});
      auto grpc_cpu = medians_.find({name, "cpu_ms_per_GB"});
      auto raw_cpu = medians_.find({raw_name, "cpu_ms_per_GB"});
      if (raw == medians_.end() || grpc_cpu == medians_.end() || raw_cpu == medians_.end()) {
        continue;
      }
      std::printf(
          "blocks %s: %s %.2f GB/s, raw TCP %.2f GB/s, ratio %.2f; CPU %s %.0f ms/GB, raw "
          "TCP %.0f ms/GB, raw/%s %.2f\n",
          size.substr(0, size.find('/')).c_str(), label, grpc / 1e9, raw->second / 1e9,
          grpc / raw->second, label, grpc_cpu->second, raw_cpu->second, label,
          raw_cpu->second / grpc_cpu->second);
    }
  }

  std::map<std::pair<std::string, std::string>, double> medians_;
};

}  // namespace
}  // namespace lockstep::transfer

int main(int argc, char** argv) {
  using namespace lockstep::transfer;  // NOLINT: main only
  size_t chunk_bytes = 512 << 10;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--chunk_kib=", 12) == 0) {
      chunk_bytes = static_cast<size_t>(std::atoi(argv[i] + 12)) << 10;
    } else {
      args.push_back(argv[i]);
    }
  }
  int to_child[2];
  int from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) Die("pipe");
  // Fork before any gRPC object exists in this process.
  const pid_t child = fork();
  if (child < 0) Die("fork");
  if (child == 0) {
    close(to_child[1]);
    close(from_child[0]);
    _exit(RunContext(to_child[0], from_child[1], chunk_bytes));
  }
  close(to_child[0]);
  close(from_child[1]);
  Bench state;
  bench = &state;
  state.commands = to_child[1];
  state.replies = from_child[0];
  state.child = child;
  std::string hello;
  char c;
  while (ReadFull(state.replies, &c, 1) && c != '\n') hello.push_back(c);
  const size_t space = hello.find(' ');
  if (space == std::string::npos) Die("no hello from the context process");
  state.grpc_address = hello.substr(0, space);
  const int raw_port = std::atoi(hello.c_str() + space + 1);

  state.kv = std::make_unique<Kv>(/*table_seed=*/2, /*fill=*/false);
  GrpcTransceiverOptions options;
  options.name = "gen bench";
  options.descriptor = TinyMoe();
  options.copiers = state.kv->copiers();
  absl::StatusOr<std::unique_ptr<GrpcTransceiver>> gen =
      GrpcTransceiver::Create(options, lockstep::SystemClock::Get());
  if (!gen.ok()) Die(gen.status().ToString());
  state.gen = std::move(*gen);
  options.pull_over_tcp = false;
  absl::StatusOr<std::unique_ptr<GrpcTransceiver>> gen_grpc =
      GrpcTransceiver::Create(options, lockstep::SystemClock::Get());
  if (!gen_grpc.ok()) Die(gen_grpc.status().ToString());
  state.gen_grpc = std::move(*gen_grpc);
  options.pull_over_tcp = true;
  options.ucx = true;
  absl::StatusOr<std::unique_ptr<GrpcTransceiver>> gen_ucx =
      GrpcTransceiver::Create(options, lockstep::SystemClock::Get());
  if (!gen_ucx.ok()) Die(gen_ucx.status().ToString());
  state.gen_ucx = std::move(*gen_ucx);
  state.raw_fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(raw_port));
  if (connect(state.raw_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Die("raw TCP connect failed");
  }
  const int one = 1;
  setsockopt(state.raw_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  for (const int64_t blocks : {64, 256}) {
    benchmark::RegisterBenchmark("BM_DataPlane", BM_DataPlane)
        ->Arg(blocks)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_Ucx", BM_Ucx)
        ->Arg(blocks)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_UcxPaired", BM_UcxPaired)
        ->Args({blocks, 1})
        ->Args({blocks, 8})
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_GrpcTransfer", BM_GrpcTransfer)
        ->Arg(blocks)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_RawTcp", BM_RawTcp)
        ->Arg(blocks)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (Crc32cPath path : {Crc32cPath::kPortable, Crc32cPath::kInstruction, Crc32cPath::kFold512}) {
    if (Crc32cSupports(path)) {
      benchmark::RegisterBenchmark("BM_Crc32c", BM_Crc32c)->Arg(static_cast<int>(path));
    }
  }
  std::string repetitions = "--benchmark_repetitions=10";
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  std::vector<char*> bench_args = {args[0], repetitions.data(), interleave.data()};
  bench_args.insert(bench_args.end(), args.begin() + 1, args.end());  // later flags win
  int bench_argc = static_cast<int>(bench_args.size());
  benchmark::Initialize(&bench_argc, bench_args.data());
  const char* poller = std::getenv("GRPC_POLL_STRATEGY");
  const char* tls = std::getenv("UCX_TLS");
  std::printf("chunk %zu KiB, UCX_TLS %s, CRC32C %s, gRPC poller %s\n", chunk_bytes >> 10,
              tls != nullptr ? tls : "(UCX default)", Crc32cPathName(Crc32cFastestPath()),
              poller != nullptr ? poller : "default (epoll1)");
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  std::printf(
      "pulls: BM_DataPlane %lld over TCP (%lld over gRPC), BM_GrpcTransfer %lld over gRPC, "
      "BM_Ucx %lld over UCX (%lld fell back)\n",
      static_cast<long long>(state.gen->pulls_over_tcp()),
      static_cast<long long>(state.gen->pulls_over_grpc()),
      static_cast<long long>(state.gen_grpc->pulls_over_grpc()),
      static_cast<long long>(state.gen_ucx->pulls_over_ucx()),
      static_cast<long long>(state.gen_ucx->ucx_fallbacks()));

  const int64_t stop = 0;
  WriteFull(state.raw_fd, &stop, sizeof(stop));
  close(state.raw_fd);
  const Command quit{2, 0, 0};
  WriteFull(state.commands, &quit, sizeof(quit));
  state.gen.reset();
  state.gen_grpc.reset();
  state.gen_ucx.reset();
  waitpid(child, nullptr, 0);
  return 0;
}
