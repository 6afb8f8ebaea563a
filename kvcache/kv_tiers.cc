#include "kvcache/kv_tiers.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/log.h"

namespace lockstep::kv {
namespace {

// FetchChain asks for each of a block's two dependent reads this many blocks before it
// needs the answer.
constexpr int64_t kStage = 4;
// A block of FetchChain's chain that the host tier does not hold.
constexpr uint32_t kNoSlot = ~uint32_t{0};

// Asks for the cache line at `p` without waiting for it.
inline void Prefetch(const void* p) { __builtin_prefetch(p); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvTiers>> KvTiers::Create(const TierConfig& config,
                                                         BlockCopier* device,
                                                         absl::Duration job_deadline,
                                                         std::shared_ptr<const void> device_owner) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  if (!config.enabled()) return absl::InvalidArgumentError("kv_tiers: host_bytes is 0");
  LOCKSTEP_CHECK(device != nullptr);
  const int64_t block_bytes = static_cast<int64_t>(device->block_bytes());
  if (config.host_bytes < block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("kv_tiers: host_bytes ", config.host_bytes,
                                                   " is less than one block (", block_bytes,
                                                   " bytes)"));
  }
  std::string dir;
  std::shared_ptr<TierFile> file;
  if (config.has_disk()) {
    const size_t tpb = static_cast<size_t>(device->layout().tokens_per_block);
    const int64_t slot_bytes = static_cast<int64_t>(TierFileBytes(tpb, device->block_bytes()));
    if (config.disk_bytes < slot_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("kv_tiers: disk_bytes ", config.disk_bytes,
                                                     " is less than one block's slot (", slot_bytes,
                                                     " bytes)"));
    }
    static std::atomic<int> instances{0};
    dir = absl::StrCat(config.disk_path, "/kv-", getpid(), "-", instances.fetch_add(1));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("kv_tiers: cannot create disk tier directory ", dir, ": ", ec.message()));
    }
    absl::StatusOr<std::unique_ptr<TierFile>> made =
        TierFile::Create(absl::StrCat(dir, "/blocks.kvt"), config.disk_bytes / slot_bytes, tpb,
                         device->block_bytes());
    if (!made.ok()) {
      std::filesystem::remove_all(dir, ec);
      return made.status();
    }
    file = *std::move(made);
  }
  return std::unique_ptr<KvTiers>(new KvTiers(config, device, std::move(dir), std::move(file),
                                              job_deadline, std::move(device_owner)));
}

KvTiers::KvTiers(const TierConfig& config, BlockCopier* device, std::string disk_dir,
                 std::shared_ptr<TierFile> disk_file, absl::Duration job_deadline,
                 std::shared_ptr<const void> device_owner)
    : config_(config),
      device_(device),
      block_bytes_(device->block_bytes()),
      tpb_(static_cast<size_t>(device->layout().tokens_per_block)),
      host_capacity_(config.host_bytes / static_cast<int64_t>(block_bytes_)),
      disk_capacity_(disk_file != nullptr ? disk_file->slots() : 0),
      max_pins_(host_capacity_ / 2),
      disk_dir_(std::move(disk_dir)),
      disk_file_(std::move(disk_file)),
      worker_(std::make_unique<TierWorker>(device, job_deadline, std::move(device_owner))) {
  stats_.block_bytes = static_cast<int64_t>(block_bytes_);
  stats_.host_capacity_blocks = host_capacity_;
  stats_.disk_capacity_blocks = disk_capacity_;
}

KvTiers::~KvTiers() {
  worker_.reset();  // runs what is queued, then joins (or leaves a stuck job its file)
  disk_file_.reset();
  if (!disk_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(disk_dir_, ec);
  }
}

KvTiers::DiskLocation KvTiers::DiskLocationOf(uint64_t key) const {
  const auto it = disk_.find(key);
  if (it == disk_.end()) return {};
  return {.path = disk_file_->path(), .offset = disk_file_->OffsetOf(it->second.slot)};
}

void KvTiers::OnEvictable(BlockId block, TierBlockMeta meta) {
  if (!failed_.ok()) {
    DropUnpinned();
    return;
  }
  if (const auto it = host_.find(meta.key); it != host_.end()) {
    TouchHost(it->second);
    return;
  }
  if (disk_.contains(meta.key)) return;
  // A block published again after its eviction may still be named as another key's
  // source only if BeforeReuse was skipped: never.
  LOCKSTEP_CHECK(!copying_.contains(block)) << "block " << block << " is already copying down";
  while (failed_.ok() && static_cast<int64_t>(host_.size()) >= host_capacity_) EvictHostLru();
  if (!failed_.ok()) {
    DropUnpinned();
    return;
  }
  auto job = std::make_shared<TierJob>();
  job->kind = TierJob::Kind::kCopyDown;
  job->block = block;
  job->bytes = std::make_shared<std::vector<std::byte>>(block_bytes_);
  const uint64_t key = meta.key;
  const uint32_t slot = TakeHostSlot();
  LOCKSTEP_CHECK(meta.tokens.size() == tpb_)
      << "block " << block << " holds " << meta.tokens.size() << " tokens, not " << tpb_;
  std::copy(meta.tokens.begin(), meta.tokens.end(), host_tokens_.begin() + slot * tpb_);
  host_slots_[slot] = HostEntry{.key = key,
                                .parent_key = meta.parent_key,
                                .data = job->bytes->data(),
                                .copy_down = job,
                                .bytes = job->bytes,
                                .source = block};
  host_.emplace(key, slot);
  TouchHost(slot);
  copying_.emplace(block, key);
  Report(key, Tier::kHost, /*stored=*/true);
  if (absl::Status queued = worker_->Enqueue(std::move(job)); !queued.ok()) {
    FailIfStuck(queued);
    DropUnpinned();  // this entry too: its copy-down was refused
  }
}

void KvTiers::BeforeReuse(BlockId block) {
  const auto it = copying_.find(block);
  if (it == copying_.end()) return;
  HostEntry& entry = host_slots_[host_.at(it->second)];
  copying_.erase(it);
  bool inline_run = false;
  const absl::Status status = worker_->Finish(*entry.copy_down, &inline_run);
  if (inline_run) ++stats_.inline_offloads;
  if (!status.ok()) {
    // A stuck copy-down may still read the block after its reuse: its bytes are
    // dropped with the entry, never served.
    EraseHost(entry.key);
    FailIfStuck(status);
    return;
  }
  entry.copy_down.reset();
}

void KvTiers::EraseHost(uint64_t key) {
  const auto it = host_.find(key);
  if (it == host_.end()) return;
  const uint32_t slot = it->second;
  if (host_slots_[slot].copy_down != nullptr) copying_.erase(host_slots_[slot].source);
  host_.erase(it);
  FreeHostSlot(slot);
  Report(key, Tier::kHost, /*stored=*/false);
}

uint32_t KvTiers::TakeHostSlot() {
  if (!free_host_slots_.empty()) {
    const uint32_t slot = free_host_slots_.back();
    free_host_slots_.pop_back();
    return slot;
  }
  host_slots_.emplace_back();
  host_stamps_.push_back(0);
  host_tokens_.resize(host_tokens_.size() + tpb_);
  return static_cast<uint32_t>(host_slots_.size() - 1);
}

void KvTiers::FreeHostSlot(uint32_t slot) {
  host_slots_[slot] = HostEntry{};
  host_stamps_[slot] = 0;  // its LRU records go stale
  free_host_slots_.push_back(slot);
}

void KvTiers::EraseDisk(uint64_t key) {
  const auto it = disk_.find(key);
  if (it == disk_.end()) return;
  disk_lru_.erase(it->second.lru);
  free_disk_slots_.push_back(it->second.slot);
  disk_.erase(it);
  Report(key, Tier::kDisk, /*stored=*/false);
}

void KvTiers::Report(uint64_t key, Tier tier, bool stored) {
  if (observer_ == nullptr) return;
  if (stored) {
    observer_->OnStoredBelow(key, tier);
  } else {
    observer_->OnRemovedBelow(key, tier);
  }
}

void KvTiers::EvictHostLru() {
  // The least recently used unpinned entry; pins hold at most half the capacity, so
  // there is one.
  while (!host_lru_.empty() && !Live(host_lru_.front())) host_lru_.pop_front();
  auto victim = host_lru_.begin();
  while (victim != host_lru_.end() && (!Live(*victim) || host_slots_[victim->slot].pins > 0)) {
    ++victim;
  }
  LOCKSTEP_CHECK(victim != host_lru_.end()) << "every host tier entry is pinned";
  const uint32_t slot = victim->slot;
  const bool front = victim == host_lru_.begin();
  HostEntry& entry = host_slots_[slot];
  const uint64_t key = entry.key;
  absl::Status copied;
  if (entry.copy_down != nullptr) {
    // Finished, not cancelled: what lands in which tier must not depend on the
    // worker's speed (the device block is still intact: BeforeReuse was not called).
    copying_.erase(entry.source);
    bool inline_run = false;
    copied = worker_->Finish(*entry.copy_down, &inline_run);
    if (inline_run) ++stats_.inline_offloads;
    entry.copy_down.reset();
  }
  const bool usable = copied.ok();
  const bool spill = usable && disk_capacity_ > 0;
  TierBlockMeta meta;
  if (spill) {
    const absl::Span<const int32_t> tokens = HostTokens(slot);
    meta = {.key = key, .parent_key = entry.parent_key, .tokens = {tokens.begin(), tokens.end()}};
  }
  std::shared_ptr<std::vector<std::byte>> bytes = std::move(entry.bytes);
  host_.erase(key);
  FreeHostSlot(slot);
  if (front) host_lru_.pop_front();  // else its record stays, stale
  Report(key, Tier::kHost, /*stored=*/false);
  FailIfStuck(copied);
  if (spill && failed_.ok()) SpillToDisk(std::move(meta), std::move(bytes));
}

void KvTiers::TouchHost(uint32_t slot) { TouchHosts({&slot, 1}); }

void KvTiers::TouchHosts(absl::Span<const uint32_t> slots) {
  // The clock in a register: a stamp's store may alias lru_clock_ (both uint64_t), so
  // the member would be read back after every stamp.
  uint64_t clock = lru_clock_;
  for (const uint32_t slot : slots) {
    if (slot == kNoSlot) continue;
    host_stamps_[slot] = ++clock;
    // Field by field: a record built aside and copied in is read back before its two
    // stores have left the store buffer, a stall per record.
    LruRecord& record = host_lru_.emplace_back();
    record.slot = slot;
    record.stamp = clock;
  }
  lru_clock_ = clock;
  if (host_lru_.size() <= 4 * host_.size() + 64) return;
  // Drop the stale records (at most a quarter are live), reading only the stamps.
  size_t kept = 0;
  for (size_t i = 0; i < host_lru_.size(); ++i) {
    if (Live(host_lru_[i])) host_lru_[kept++] = host_lru_[i];
  }
  host_lru_.resize(kept);
}

void KvTiers::SpillToDisk(TierBlockMeta meta, std::shared_ptr<std::vector<std::byte>> bytes) {
  // Below capacity, a slot is free or was never used (EraseDisk frees them).
  while (failed_.ok() && static_cast<int64_t>(disk_.size()) >= disk_capacity_) EvictDiskLru();
  if (!failed_.ok()) return;  // dropped
  int64_t slot = next_disk_slot_;
  if (free_disk_slots_.empty()) {
    ++next_disk_slot_;
  } else {
    slot = free_disk_slots_.back();
    free_disk_slots_.pop_back();
  }
  const uint64_t key = meta.key;
  auto job = std::make_shared<TierJob>();
  job->kind = TierJob::Kind::kDiskWrite;
  job->bytes = std::move(bytes);
  job->meta = meta;
  job->file = disk_file_;
  job->slot = slot;
  disk_lru_.push_back(key);
  disk_.emplace(
      key,
      DiskEntry{
          .meta = std::move(meta), .slot = slot, .write = job, .lru = std::prev(disk_lru_.end())});
  Report(key, Tier::kDisk, /*stored=*/true);
  if (absl::Status queued = worker_->Enqueue(std::move(job)); !queued.ok()) {
    EraseDisk(key);  // refused, never runs: its slot is free
    FailIfStuck(queued);
  }
}

void KvTiers::EvictDiskLru() {
  const uint64_t key = disk_lru_.front();
  DiskEntry& entry = disk_.at(key);
  // Cancelled while queued, else waited for: either way no write to its slot is left
  // to run when the slot is freed. A write that missed its deadline may still land in
  // its slot: the tiers are then off, and no slot is written again.
  if (entry.write != nullptr) FailIfStuck(worker_->Cancel(*entry.write));
  EraseDisk(key);
}

void KvTiers::FailIfStuck(const absl::Status& status) {
  if (!absl::IsDeadlineExceeded(status) || !failed_.ok()) return;
  failed_ = absl::UnavailableError(
      absl::StrCat("KV tiers are off (their blocks are recomputed): ", status.message()));
  ++stats_.stuck_jobs;
  LOCKSTEP_LOG_ERROR("kv", "{}; the rank serves on without its host and disk tiers",
                     std::string(failed_.message()));
}

void KvTiers::DropUnpinned() {
  for (auto it = host_.begin(); it != host_.end();) {
    const uint64_t key = it->first;
    const bool pinned = host_slots_[it->second].pins > 0;
    ++it;
    if (!pinned) EraseHost(key);
  }
  while (!disk_lru_.empty()) EraseDisk(disk_lru_.front());
}

bool KvTiers::Matching(uint64_t key, uint64_t parent_key, absl::Span<const int32_t> tokens) const {
  if (const auto h = host_.find(key); h != host_.end()) {
    return HostMatches(h->second, parent_key, tokens);
  }
  const auto d = disk_.find(key);
  return d != disk_.end() && SameBlock(d->second.meta, parent_key, tokens);
}

bool KvTiers::SameBlock(const TierBlockMeta& meta, uint64_t parent_key,
                        absl::Span<const int32_t> tokens) {
  return meta.parent_key == parent_key &&
         std::equal(meta.tokens.begin(), meta.tokens.end(), tokens.begin(), tokens.end());
}

absl::Status KvTiers::FetchHost(uint32_t slot) {
  if (const absl::Status status = FinishCopyDown(slot); !status.ok()) {
    return absl::NotFoundError(absl::StrCat("host tier: copy-down failed: ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> KvTiers::Fetch(uint64_t key,
                                                                             Tier* from) {
  if (!failed_.ok()) return failed_;
  if (const auto h = host_.find(key); h != host_.end()) {
    *from = Tier::kHost;
    if (absl::Status status = FetchHost(h->second); !status.ok()) return status;
    TouchHost(h->second);
    return std::shared_ptr<const std::vector<std::byte>>(host_slots_[h->second].bytes);
  }
  const auto d = disk_.find(key);
  if (d == disk_.end()) return absl::NotFoundError(absl::StrCat("no tier holds block ", key));
  *from = Tier::kDisk;
  std::shared_ptr<const std::vector<std::byte>> bytes;
  if (absl::Status status = FetchDisk(key, d->second, &bytes); !status.ok()) return status;
  if (bytes != nullptr) return bytes;
  std::vector<std::shared_ptr<const std::vector<std::byte>>> read;
  if (absl::Status status = ReadDisk({&key, 1}, &read); !status.ok()) {
    return absl::NotFoundError(absl::StrCat("disk tier miss: ", status.message()));
  }
  return std::move(read[0]);
}

absl::Status KvTiers::FetchDisk(uint64_t key, DiskEntry& entry,
                                std::shared_ptr<const std::vector<std::byte>>* bytes) {
  disk_lru_.splice(disk_lru_.end(), disk_lru_, entry.lru);
  if (entry.write == nullptr) return absl::OkStatus();
  if (!worker_->Done(*entry.write)) {
    // Still in memory: the write only reads these bytes.
    *bytes = entry.write->bytes;
    return absl::OkStatus();
  }
  const absl::Status status = worker_->StatusOf(*entry.write);
  entry.write.reset();
  if (status.ok()) return absl::OkStatus();
  EraseDisk(key);
  FailIfStuck(status);
  return absl::NotFoundError(absl::StrCat("disk tier: write failed: ", status.message()));
}

absl::Status KvTiers::ReadDisk(absl::Span<const uint64_t> keys,
                               std::vector<std::shared_ptr<const std::vector<std::byte>>>* bytes) {
  auto job = std::make_shared<TierJob>();
  job->kind = TierJob::Kind::kDiskRead;
  job->file = disk_file_;
  job->reads.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const DiskEntry& entry = disk_.at(keys[i]);
    TierJob::Read& read = job->reads[i];
    read.slot = entry.slot;
    read.meta = entry.meta;
    read.bytes = std::make_shared<std::vector<std::byte>>(block_bytes_);
  }
  // First in the queue: an onboard waits for it, not for the copy-downs and writes
  // queued before (at most the one running).
  absl::Status status = worker_->Enqueue(job, /*urgent=*/true);
  if (status.ok()) status = worker_->Await(*job);
  if (!status.ok()) {  // the read may still run later, into the job's own bytes
    FailIfStuck(status);
    return status;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    TierJob::Read& read = job->reads[i];
    if (!read.status.ok()) {
      ++stats_.disk_corrupt;
      EraseDisk(keys[i]);
      return read.status;
    }
    bytes->push_back(std::move(read.bytes));
  }
  return absl::OkStatus();
}

int64_t KvTiers::FetchChain(BlockHasher hasher, uint64_t parent_key,
                            absl::Span<const int32_t> tokens, int64_t max_blocks, bool hold,
                            FetchedBlocks* out) {
  const size_t tpb = tpb_;
  const int64_t blocks = std::min<int64_t>(max_blocks, static_cast<int64_t>(tokens.size() / tpb));
  chain_keys_.clear();
  for (uint64_t key = parent_key; static_cast<int64_t>(chain_keys_.size()) < blocks;) {
    key = hasher(key, tokens.subspan(chain_keys_.size() * tpb, tpb));
    chain_keys_.push_back(key);
  }
  return FetchChain(chain_keys_, parent_key, tokens, blocks, hold, out);
}

int64_t KvTiers::FetchChain(absl::Span<const uint64_t> keys, uint64_t parent_key,
                            absl::Span<const int32_t> tokens, int64_t max_blocks, bool hold,
                            FetchedBlocks* out) {
  if (!failed_.ok()) return 0;
  const size_t tpb = tpb_;
  const int64_t blocks = std::min(
      {max_blocks, static_cast<int64_t>(tokens.size() / tpb), static_cast<int64_t>(keys.size())});
  // A prefix that comes back long after it left finds its host entries out of cache, and
  // each block's check is two dependent reads: its index slot, then its entry and its
  // tokens (both found from the slot). Each is asked for kStage blocks before
  // the next needs it (index slot 2 * kStage blocks ahead of the block being checked,
  // entry and tokens kStage), so the misses of successive blocks overlap instead of
  // following one another. Nothing below inserts into host_, and erasing (a failed
  // copy-down) ends the chain at once, so the slots found ahead stay valid.
  chain_slots_.clear();
  read_keys_.clear();
  read_at_.clear();
  const size_t base = out->data.size();
  int64_t fetched = blocks;
  int64_t asked = 0;  // blocks whose index slot was asked for
  uint64_t parent = parent_key;
  for (int64_t i = 0; i < blocks; ++i) {
    for (const int64_t end = std::min(blocks, i + 2 * kStage + 1); asked < end; ++asked) {
      host_.prefetch(keys[static_cast<size_t>(asked)]);
    }
    for (int64_t end = std::min(blocks, i + kStage + 1);
         static_cast<int64_t>(chain_slots_.size()) < end;) {
      const auto h = host_.find(keys[chain_slots_.size()]);
      chain_slots_.push_back(h == host_.end() ? kNoSlot : h->second);
      if (h != host_.end()) {
        Prefetch(&host_slots_[h->second]);
        const int32_t* copy = &host_tokens_[h->second * tpb_];
        Prefetch(copy);
        Prefetch(copy + tpb_ - 1);
      }
    }
    const uint64_t key = keys[static_cast<size_t>(i)];
    const uint32_t slot = chain_slots_[i];
    const absl::Span<const int32_t> block = tokens.subspan(static_cast<size_t>(i) * tpb, tpb);
    if (slot != kNoSlot) {  // as Matching and Fetch would, without their finds
      // A miss after all: a failed copy-down.
      if (!HostMatches(slot, parent, block) || !FetchHost(slot).ok()) {
        fetched = i;
        break;
      }
      const HostEntry& entry = host_slots_[slot];
      out->data.push_back(entry.data);
      if (hold) out->owned.push_back(entry.bytes);
    } else {
      const auto d = disk_.find(key);
      std::shared_ptr<const std::vector<std::byte>> bytes;
      // A miss after all: a failed write.
      if (d == disk_.end() || !SameBlock(d->second.meta, parent, block) ||
          !FetchDisk(key, d->second, &bytes).ok()) {
        fetched = i;
        break;
      }
      if (bytes == nullptr) {  // read below, with the chain's other disk blocks
        read_keys_.push_back(key);
        read_at_.push_back(out->data.size());
        out->data.push_back(nullptr);
      } else {
        out->data.push_back(bytes->data());
        out->owned.push_back(std::move(bytes));
      }
    }
    out->from.push_back(slot != kNoSlot ? Tier::kHost : Tier::kDisk);
    out->keys.push_back(key);
    parent = key;
  }
  if (read_keys_.empty()) return TouchChain(fetched);
  // One worker job reads them all (one hand-off a chain); the chain ends before the
  // first that fails (a damaged record, or a stuck read: the tiers are then off).
  read_bytes_.clear();
  ReadDisk(read_keys_, &read_bytes_).IgnoreError();
  for (size_t r = 0; r < read_bytes_.size(); ++r) {
    out->data[read_at_[r]] = read_bytes_[r]->data();
    out->owned.push_back(std::move(read_bytes_[r]));
  }
  if (read_bytes_.size() < read_keys_.size()) {
    const size_t end = read_at_[read_bytes_.size()];
    fetched = static_cast<int64_t>(end - base);
    out->keys.resize(end);
    out->data.resize(end);
    out->from.resize(end);
  }
  return TouchChain(fetched);
}

int64_t KvTiers::TouchChain(int64_t fetched) {
  TouchHosts(absl::MakeConstSpan(chain_slots_).first(static_cast<size_t>(fetched)));
  return fetched;
}

absl::Status KvTiers::CopyToDevice(const std::vector<std::byte>& bytes, BlockId dst, Tier from) {
  if (bytes.size() != block_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("onboard of ", bytes.size(), " bytes into a block of ", block_bytes_));
  }
  const std::byte* one = bytes.data();
  return CopyToDevice({&one, 1}, {&dst, 1}, {&from, 1});
}

absl::Status KvTiers::CopyToDevice(absl::Span<const std::byte* const> data,
                                   absl::Span<const BlockId> dst, absl::Span<const Tier> from) {
  if (data.size() != dst.size() || data.size() != from.size()) {
    return absl::InvalidArgumentError(absl::StrCat("onboard of ", data.size(), " blocks into ",
                                                   dst.size(), " from ", from.size()));
  }
  const int64_t start = NowNs();
  // Sources in ascending address order: the hardware prefetchers follow a rising stream
  // across blocks, not a falling one, and a released prefix leaves its blocks deepest
  // first, so its host buffers usually lie at falling addresses in chain order (a copy
  // in chain order ran 1.6-2.3x slower than ascending, docs/perf/kv_tiers.md). Ascending,
  // the copy needs no software prefetch of the next block's pages. Falling and rising
  // runs are common, so they are reversed or kept without a sort.
  copy_order_.resize(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    // Field by field, as TouchHosts writes its records.
    copy_order_[i].data = data[i];
    copy_order_[i].block = dst[i];
  }
  const auto rising = [](const BlockSource& a, const BlockSource& b) { return a.data < b.data; };
  if (!std::is_sorted(copy_order_.begin(), copy_order_.end(), rising)) {
    if (std::is_sorted(copy_order_.rbegin(), copy_order_.rend(), rising)) {
      std::reverse(copy_order_.begin(), copy_order_.end());
    } else {
      std::sort(copy_order_.begin(), copy_order_.end(), rising);
    }
  }
  if (absl::Status status = device_->CopyBlocksInCached(copy_order_); !status.ok()) return status;
  stats_.onboard_ns += NowNs() - start;
  // Counted in registers: an increment of a counter in memory per block waits for the
  // previous one's store.
  int64_t host = 0;
  int64_t disk = 0;
  for (const Tier t : from) {
    host += t == Tier::kHost ? 1 : 0;
    disk += t == Tier::kDisk ? 1 : 0;
  }
  stats_.onboarded_blocks[static_cast<int>(Tier::kHost)] += host;
  stats_.onboarded_blocks[static_cast<int>(Tier::kDisk)] += disk;
  stats_.onboarded_blocks[static_cast<int>(Tier::kDevice)] +=
      static_cast<int64_t>(from.size()) - host - disk;
  return absl::OkStatus();
}

std::shared_ptr<const std::vector<std::byte>> KvTiers::Pin(uint64_t key, uint64_t parent_key,
                                                           absl::Span<const int32_t> tokens) {
  if (pins_ >= max_pins_ || !failed_.ok()) return nullptr;
  const auto it = host_.find(key);
  if (it == host_.end() || !Matching(key, parent_key, tokens)) return nullptr;
  const uint32_t slot = it->second;
  if (!FinishCopyDown(slot).ok()) return nullptr;
  TouchHost(slot);
  HostEntry& entry = host_slots_[slot];
  ++entry.pins;
  ++pins_;
  return entry.bytes;
}

absl::Status KvTiers::FinishCopyDown(uint32_t slot) {
  HostEntry& entry = host_slots_[slot];
  if (entry.copy_down == nullptr) return absl::OkStatus();
  copying_.erase(entry.source);
  bool inline_run = false;
  const absl::Status status = worker_->Finish(*entry.copy_down, &inline_run);
  if (inline_run) ++stats_.inline_offloads;
  entry.copy_down.reset();
  if (!status.ok()) EraseHost(entry.key);
  FailIfStuck(status);
  return status;
}

void KvTiers::Unpin(uint64_t key) {
  const auto it = host_.find(key);
  LOCKSTEP_CHECK(it != host_.end() && host_slots_[it->second].pins > 0)
      << "unpin of unpinned block " << key;
  --host_slots_[it->second].pins;
  --pins_;
}

Tier KvTiers::Where(uint64_t key) const {
  if (host_.contains(key)) return Tier::kHost;
  if (disk_.contains(key)) return Tier::kDisk;
  return Tier::kDevice;
}

absl::Status KvTiers::Flush() {
  absl::Status status = worker_->Flush();
  FailIfStuck(status);
  return status;
}

TierStats KvTiers::Stats() const {
  TierStats s = stats_;
  s.host_blocks = static_cast<int64_t>(host_.size());
  s.disk_blocks = static_cast<int64_t>(disk_.size());
  s.pinned_blocks = pins_;
  worker_->Counters(&s.offloaded_blocks, &s.offload_ns, &s.disk_writes, &s.disk_write_errors);
  return s;
}

void KvTiers::AuditInto(const std::string& prefix, std::vector<std::string>* out) const {
  auto report = [&](auto&&... parts) { out->push_back(absl::StrCat(prefix, parts...)); };
  if (static_cast<int64_t>(host_.size()) > host_capacity_) {
    report("host tier holds ", host_.size(), " blocks, capacity ", host_capacity_);
  }
  if (static_cast<int64_t>(disk_.size()) > disk_capacity_) {
    report("disk tier holds ", disk_.size(), " blocks, capacity ", disk_capacity_);
  }
  const int64_t live = std::count_if(host_lru_.begin(), host_lru_.end(),
                                     [this](const LruRecord& r) { return Live(r); });
  if (live != static_cast<int64_t>(host_.size())) {
    report("host tier LRU lists ", live, " live keys for ", host_.size(), " entries");
  }
  if (disk_lru_.size() != disk_.size()) {
    report("disk tier LRU lists ", disk_lru_.size(), " keys for ", disk_.size(), " entries");
  }
  if (pins_ > max_pins_) report(pins_, " host tier pins, cap ", max_pins_);
  int64_t pins = 0;
  if (host_.size() + free_host_slots_.size() != host_slots_.size()) {
    report("host tier indexes ", host_.size(), " entries and ", free_host_slots_.size(),
           " free slots of ", host_slots_.size());
  }
  for (const auto& [key, slot] : host_) {
    if (slot >= host_slots_.size() || host_stamps_[slot] == 0) {
      report("host tier entry ", key, " is in slot ", slot, ", which is not in use");
      continue;
    }
    const HostEntry& e = host_slots_[slot];
    pins += e.pins;
    if (e.pins < 0) report("host tier entry ", key, " has ", e.pins, " pins");
    if (e.pins > 0 && e.copy_down != nullptr) {
      report("host tier entry ", key, " is pinned while its copy-down may still run");
    }
    if (e.key != key) report("host tier entry ", key, " names key ", e.key);
    if (disk_.contains(key)) report("key ", key, " is in the host and the disk tier");
    if (e.bytes == nullptr || e.bytes->size() != block_bytes_ || e.data != e.bytes->data()) {
      report("host tier entry ", key, " does not hold one block of bytes");
    }
    if (e.copy_down != nullptr) {
      const auto c = copying_.find(e.source);
      if (c == copying_.end() || c->second != key) {
        report("host tier entry ", key, " copies down from block ", e.source.value(),
               ", which is not recorded as copying it");
      }
    }
  }
  if (pins != pins_) report("host tier entries hold ", pins, " pins, counted ", pins_);
  for (const uint64_t key : disk_lru_) {
    if (!disk_.contains(key)) report("disk tier LRU names key ", key, " with no entry");
  }
  if (static_cast<int64_t>(disk_.size() + free_disk_slots_.size()) != next_disk_slot_ ||
      next_disk_slot_ > disk_capacity_) {
    report("disk tier indexes ", disk_.size(), " entries and ", free_disk_slots_.size(),
           " free slots of ", next_disk_slot_, " used, capacity ", disk_capacity_);
  }
  std::vector<bool> slot_used(static_cast<size_t>(std::min(next_disk_slot_, disk_capacity_)));
  auto use_slot = [&](int64_t slot, auto&&... whose) {
    if (slot < 0 || slot >= static_cast<int64_t>(slot_used.size())) {
      report("disk tier slot ", slot, " of ", whose..., " is outside the ", slot_used.size(),
             " slots used");
    } else if (slot_used[slot]) {
      report("disk tier slot ", slot, " is used twice, again by ", whose...);
    } else {
      slot_used[slot] = true;
    }
  };
  for (const auto& [key, entry] : disk_) use_slot(entry.slot, "key ", key);
  for (const int64_t slot : free_disk_slots_) use_slot(slot, "the free list");
  for (const auto& [block, key] : copying_) {
    const auto it = host_.find(key);
    if (it == host_.end() || host_slots_[it->second].copy_down == nullptr ||
        host_slots_[it->second].source != block) {
      report("block ", block.value(), " is recorded as copying down key ", key,
             ", which has no such copy-down");
    }
  }
}

}  // namespace lockstep::kv
