// KvTiers: the host and disk tiers below one rank's target pool (docs/design.md §5.1).
// Blocks are named by the radix tree's prefix-hash keys (prefix_hash.h), so a block
// below the device is found by the same chain as one in it, and every hit compares its
// parent key and tokens too.
//
// Down. When a published target block becomes evictable (refcount = the tree's pin),
// KvPool calls OnEvictable: unless its key is already below, a host slot is taken (the
// host LRU entry makes room: to disk when there is a disk tier, else dropped) and a
// copy-down is queued to the worker thread (tier_worker.h), which reads the block
// through the pool's BlockCopier. The step never waits for it. Before the pool reuses an
// evicted block it calls BeforeReuse: a copy-down still queued runs there (counted as
// inline), one running is waited for (one block copy). Host entries the host tier
// evicts are written to disk by the same worker, each into a free slot of the rank's one
// preallocated disk file, with checksums (tier_file.h). A disk slot is free, being
// written (its write queued or running: read from the entry's bytes in memory, never
// from the file) or holding a ready entry; evicting a disk entry cancels its write or
// waits for it before the slot is free again, so no slot is ever handed to a second
// write while the first may still run.
//
// Up. FetchChain follows a prompt's chain below the device and hands out the verified
// bytes of each block found (a disk block whose checksum fails is dropped and is a miss,
// never served). The disk blocks are read on the worker, all of one chain in one job
// queued ahead of the copy-downs and writes, and waited for with the job deadline: a
// stalled file system never holds the owner's thread past it;
// CopyToDevice writes them into freshly allocated device blocks, through the caches (the
// prefill that follows reads them).
//
// Pins. A transfer claim may read a host entry's bytes directly instead of the device
// block (tier_pins.h): Pin finishes the entry's copy-down and pins it, and a pinned entry
// is never evicted until Unpin (host bytes are never written after their copy-down, so
// pinned bytes cannot change). Pins hold at most half of the host capacity, so a
// copy-down always finds an unpinned entry to make room.
//
// Stuck. A worker job that misses its deadline (a stalled disk or memory system,
// tier_worker.h; a disk read too: that fetch is then a miss) turns both tiers off for good, as the
// worker thread is gone: the waiting call treats it as a miss or a failed copy-down, later calls
// store nothing and find nothing (the blocks are recomputed), unpinned entries are dropped at the
// next OnEvictable (pinned ones when unpinned and evictable), spills are dropped, and
// Stats().stuck_jobs counts it. A stuck write's slot is never reused.
//
// Determinism: which keys sit in which tier depends only on the calls made (all index
// changes happen on the caller's thread); only byte copies run on the worker.
//
// Thread safety: every method but the destructor runs on the owner's thread (the
// executor's, through KvManager). The worker touches only its jobs' buffers, the
// copier (thread-safe) and files.
#ifndef LOCKSTEP_KVCACHE_KV_TIERS_H_
#define LOCKSTEP_KVCACHE_KV_TIERS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_hash.h"
#include "kvcache/kv_events.h"
#include "kvcache/tier_config.h"
#include "kvcache/tier_file.h"
#include "kvcache/tier_worker.h"

namespace lockstep::kv {

// Blocks fetched for one onboard (KvTiers::FetchChain), in chain order: each block's key,
// the address of its verified bytes (block_bytes() of them) and the tier that held them.
// `owned` keeps bytes alive: at least those of every block read from disk (no tier keeps
// them), and with `hold` every block's. Bytes it does not hold are a host entry's and
// stay valid until the tiers' next OnEvictable (nothing else drops a fetched entry).
struct FetchedBlocks {
  std::vector<uint64_t> keys;
  std::vector<const std::byte*> data;
  std::vector<Tier> from;
  std::vector<std::shared_ptr<const std::vector<std::byte>>> owned;
  void Clear() {
    keys.clear();
    data.clear();
    from.clear();
    owned.clear();
  }
};

class KvTiers {
 public:
  // `device` is the target pool's copier (not owned; must outlive this). With a disk
  // tier, a fresh subdirectory of config.disk_path holds this instance's disk file
  // (disk_bytes / TierFileBytes slots, reserved here); it is removed by the destructor.
  // `job_deadline`: how long a wait for one worker job may take (tier_worker.h).
  // `device_owner` (may be null): keeps `device` and its pool's memory alive for a
  // copy-down still running after this is destroyed (TierWorker; without it they must
  // outlive such a copy-down).
  static absl::StatusOr<std::unique_ptr<KvTiers>> Create(
      const TierConfig& config, BlockCopier* device, absl::Duration job_deadline = kTierJobDeadline,
      std::shared_ptr<const void> device_owner = nullptr);
  ~KvTiers();  // finishes the queued jobs, stops the worker, removes the disk file
  KvTiers(const KvTiers&) = delete;
  KvTiers& operator=(const KvTiers&) = delete;

  // Device block `block` (published under meta.key) became evictable.
  void OnEvictable(BlockId block, TierBlockMeta meta);
  // Device block `block` is about to be reused for other KV.
  void BeforeReuse(BlockId block);

  // The bytes of block `key` (one block), verified; `from` says which tier held them.
  // NotFound when no tier holds it or a disk copy failed verification (then dropped).
  absl::StatusOr<std::shared_ptr<const std::vector<std::byte>>> Fetch(uint64_t key, Tier* from);
  // The blocks of `tokens` (whole blocks,
  // at most `max_blocks`) continuing the chain of `parent_key`, each named by
  // hasher(parent, its tokens), found below the device with its parent and tokens
  // matching, and fetched; stops at the first miss (or a disk copy failing
  // verification). Appends them to `*out` (`hold`: with every block's bytes in
  // out->owned); returns how many.
  int64_t FetchChain(BlockHasher hasher, uint64_t parent_key, absl::Span<const int32_t> tokens,
                     int64_t max_blocks, bool hold, FetchedBlocks* out);
  // The same where keys[i] is the key of block i of `tokens` (a request's prefix keys,
  // known before): nothing is hashed, and no more than keys.size() blocks are fetched.
  int64_t FetchChain(absl::Span<const uint64_t> keys, uint64_t parent_key,
                     absl::Span<const int32_t> tokens, int64_t max_blocks, bool hold,
                     FetchedBlocks* out);
  // Writes fetched bytes into device block `dst` (counted as onboarded from `from`).
  absl::Status CopyToDevice(const std::vector<std::byte>& bytes, BlockId dst, Tier from);
  // The same for several blocks, the block_bytes() at data[i] into dst[i] from from[i]
  // (equal lengths), timed as one copy, in the sources' address order; through the
  // copier's CopyInCached: the next prefill reads them.
  absl::Status CopyToDevice(absl::Span<const std::byte* const> data, absl::Span<const BlockId> dst,
                            absl::Span<const Tier> from);

  // Pins host entry `key` when it continues `parent_key` with `tokens` (tokens_per_block
  // of them) and the pins held stay within half the host capacity; finishes its
  // copy-down first. Returns its bytes (valid and unchanged while pinned), or null (not
  // in the host tier, another chain's block, a failed copy-down, or the pin cap).
  std::shared_ptr<const std::vector<std::byte>> Pin(uint64_t key, uint64_t parent_key,
                                                    absl::Span<const int32_t> tokens);
  // Drops one pin of `key` (a key with no pin is a caller bug: checked).
  void Unpin(uint64_t key);
  // Counts `blocks` that a transfer read from pinned host entries (TierStats).
  void RecordServed(int64_t blocks) { stats_.served_blocks += blocks; }

  // Each key the host and disk tiers store or remove is reported to `observer`
  // (kv_events.h; not owned, null: nobody), on the owner's thread.
  void set_event_observer(KvEventObserver* observer) { observer_ = observer; }

  // Which tier holds `key` below the device (kDevice: none).
  Tier Where(uint64_t key) const;
  // Waits for every queued job (tests and benchmarks); DEADLINE_EXCEEDED when that
  // takes longer than the job deadline (the tiers are then off).
  absl::Status Flush();
  // OK, or why the tiers are off (a stuck worker job).
  const absl::Status& failed() const { return failed_; }

  TierStats Stats() const;
  // Whether neither tier holds a block (cheaper than Stats()).
  bool empty() const { return host_.empty() && disk_.empty(); }
  size_t block_bytes() const { return block_bytes_; }
  // One line per broken invariant, each starting with `prefix`: a key in two tiers,
  // entry counts over capacity or out of step with the LRU lists, a copy-down whose
  // block or key is not its entry's, a buffer of the wrong size, a pinned entry still
  // copying down, pins that do not add up or exceed their cap.
  void AuditInto(const std::string& prefix, std::vector<std::string>* out) const;
  // The disk tier's directory ("" without one) and file (null without one), for tests.
  const std::string& disk_dir() const { return disk_dir_; }
  TierFile* disk_file() const { return disk_file_.get(); }
  // Where the disk tier holds `key`'s record: its file and the offset of its slot
  // (TierFileBytes long); offset -1 when the disk tier does not hold it. For tests.
  struct DiskLocation {
    std::string path;
    int64_t offset = -1;
  };
  DiskLocation DiskLocationOf(uint64_t key) const;

 private:
  // A host tier entry, in host_slots_. Its first cache line holds what an onboard reads;
  // its tokens are in host_tokens_ (HostTokens).
  struct alignas(64) HostEntry {
    uint64_t key = 0;
    uint64_t parent_key = 0;
    const std::byte* data = nullptr;  // bytes->data()
    std::shared_ptr<TierJob> copy_down;  // null once known finished
    std::shared_ptr<std::vector<std::byte>> bytes;
    BlockId source{-1};  // the device block the copy-down reads
    int32_t pins = 0;    // transfer claims reading `bytes` (never evicted)
  };
  // host_lru_'s records: a record is live while host_stamps_[slot] is its stamp;
  // touching an entry appends a new record (the old one goes stale) instead of moving a
  // list node, which would read the node's neighbours, out of cache when a prefix comes
  // back late. Stamps are never reused, so a record outlives its slot's reuse harmlessly.
  struct LruRecord {
    uint32_t slot;
    uint64_t stamp;
  };
  struct DiskEntry {
    TierBlockMeta meta;
    int64_t slot = -1;               // in disk_file_
    std::shared_ptr<TierJob> write;  // null once known finished
    std::list<uint64_t>::iterator lru;
  };

  KvTiers(const TierConfig& config, BlockCopier* device, std::string disk_dir,
          std::shared_ptr<TierFile> disk_file, absl::Duration job_deadline,
          std::shared_ptr<const void> device_owner);
  // Turns the tiers off when `status` (from the worker) is a missed deadline.
  void FailIfStuck(const absl::Status& status);
  // Drops every unpinned host entry and every disk entry (the tiers are off).
  void DropUnpinned();
  void EvictHostLru();
  // Makes host slot `slot` the host tier's most recently used; drops stale records
  // when they outnumber the live ones.
  void TouchHost(uint32_t slot);
  // The same for each of `slots` in order (kNoSlot: skipped), compacting once.
  void TouchHosts(absl::Span<const uint32_t> slots);
  // Touches the host slots of FetchChain's first `fetched` blocks, in chain order;
  // returns `fetched`.
  int64_t TouchChain(int64_t fetched);
  bool Live(const LruRecord& record) const { return host_stamps_[record.slot] == record.stamp; }
  // A free host slot (grows the slots when none is free).
  uint32_t TakeHostSlot();
  // Empties `slot` (already out of host_) and lists it as free; its LRU records go stale.
  void FreeHostSlot(uint32_t slot);
  void EvictDiskLru();
  // Writes an evicted host entry (`meta` and its bytes) to the disk tier.
  void SpillToDisk(TierBlockMeta meta, std::shared_ptr<std::vector<std::byte>> bytes);
  void EraseHost(uint64_t key);
  // Waits for host slot `slot`'s copy-down, if one is pending; a failed one erases the
  // entry (the slot is then free) and is returned.
  absl::Status FinishCopyDown(uint32_t slot);
  // What a fetch of disk entry `key` does before reading it (Fetch and FetchChain):
  // makes it the disk tier's most recently used; while its write may still run, sets
  // *bytes to the bytes being written (in memory, not read); NotFound when its write
  // failed (the entry is then dropped).
  absl::Status FetchDisk(uint64_t key, DiskEntry& entry,
                         std::shared_ptr<const std::vector<std::byte>>* bytes);
  // Reads disk entries `keys` (their writes finished) in one worker job queued first,
  // waiting up to the job deadline, and appends each verified block's bytes to `*bytes`
  // in order, up to the first that fails: a damaged record is dropped (disk_corrupt)
  // and its error returned; a stuck read returns DEADLINE_EXCEEDED and turns the
  // tiers off.
  absl::Status ReadDisk(absl::Span<const uint64_t> keys,
                        std::vector<std::shared_ptr<const std::vector<std::byte>>>* bytes);
  // What a fetch of host slot `slot` does before handing out its bytes (Fetch and
  // FetchChain, which then touch it): finishes its copy-down; NotFound when the
  // copy-down failed (the slot is then free).
  absl::Status FetchHost(uint32_t slot);
  // Drops disk entry `key` and frees its slot; its write, if any, is finished or
  // cancelled.
  void EraseDisk(uint64_t key);
  void Report(uint64_t key, Tier tier, bool stored);
  // Whether `key` is in the host or disk tier naming the block after `parent_key` holding
  // `tokens`.
  bool Matching(uint64_t key, uint64_t parent_key, absl::Span<const int32_t> tokens) const;
  // The tokens of host slot `slot`'s block (tpb_ of them).
  absl::Span<const int32_t> HostTokens(uint32_t slot) const {
    return absl::MakeConstSpan(host_tokens_).subspan(slot * tpb_, tpb_);
  }
  // Whether host slot `slot` names the block after `parent_key` holding `tokens`.
  bool HostMatches(uint32_t slot, uint64_t parent_key, absl::Span<const int32_t> tokens) const {
    const absl::Span<const int32_t> held = HostTokens(slot);
    return host_slots_[slot].parent_key == parent_key &&
           std::equal(held.begin(), held.end(), tokens.begin(), tokens.end());
  }
  // Whether `meta` names the block after `parent_key` holding `tokens`.
  static bool SameBlock(const TierBlockMeta& meta, uint64_t parent_key,
                        absl::Span<const int32_t> tokens);

  const TierConfig config_;
  BlockCopier* const device_;
  const size_t block_bytes_;
  const size_t tpb_;  // tokens a block
  const int64_t host_capacity_;
  const int64_t disk_capacity_;
  const int64_t max_pins_;  // half the host capacity
  const std::string disk_dir_;
  // Null without a disk tier; shared with the disk writes, so a stuck one keeps it open.
  std::shared_ptr<TierFile> disk_file_;
  std::unique_ptr<TierWorker> worker_;

  // The host tier: key -> slot in host_slots_ (a small map, so an onboard's lookups stay
  // in cache; the entries are found at known addresses and asked for ahead of use).
  absl::flat_hash_map<uint64_t, uint32_t> host_;
  std::vector<HostEntry> host_slots_;
  std::vector<uint64_t> host_stamps_;  // per slot: its live LRU stamp, 0 when free
  // Per slot, its block's tpb_ tokens from slot * tpb_ (their only copy), at an address
  // known from the slot alone, so an onboard asks for them with the entry.
  std::vector<int32_t> host_tokens_;
  std::vector<uint32_t> free_host_slots_;
  std::deque<LruRecord> host_lru_;     // least recently used first; stale records skipped
  uint64_t lru_clock_ = 0;             // the last stamp handed out
  std::vector<uint64_t> chain_keys_;   // FetchChain's scratch
  std::vector<uint32_t> chain_slots_;  // FetchChain's scratch
  std::vector<BlockSource> copy_order_;  // CopyToDevice's scratch
  // FetchChain's scratch: the disk blocks to read, their places in `out`, their bytes.
  std::vector<uint64_t> read_keys_;
  std::vector<size_t> read_at_;
  std::vector<std::shared_ptr<const std::vector<std::byte>>> read_bytes_;
  absl::flat_hash_map<uint64_t, DiskEntry> disk_;
  std::list<uint64_t> disk_lru_;
  // Slots from next_disk_slot_ on were never used; below it, a slot is an entry's or in
  // free_disk_slots_ (no write queued or running for any of those), reused last freed
  // first. Grown on use: a large disk tier costs no memory up front.
  int64_t next_disk_slot_ = 0;
  std::vector<int64_t> free_disk_slots_;
  absl::flat_hash_map<BlockId, uint64_t> copying_;  // device block -> key being copied down
  TierStats stats_;
  int64_t pins_ = 0;  // over all host entries
  absl::Status failed_;  // not OK: the tiers are off (see "Stuck" above)
  KvEventObserver* observer_ = nullptr;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_KV_TIERS_H_
