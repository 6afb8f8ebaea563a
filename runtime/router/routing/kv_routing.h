// KvRouting: the router's side of KV events. It applies the leaders' reports
// (RouterService.ReportKvEvents) to the KvPrefixIndex, answering with the ranks it
// needs snapshots of, and looks up how much of a prompt each instance's ranks hold:
// the prompt's block-hash chain is computed once per hashing scheme in use (the
// salt and tokens_per_block each instance reports; normally one for all), with
// PrefixHashChain, the workers' own function (kvcache/prefix_hash.h).
//
// Only the prompt minus its last token counts, in full blocks: what a worker reuses
// (kvcache/kv_manager.h CreateCache).
//
// Thread safety: thread-safe (its own mutex, then the index's; it calls nothing else).
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_ROUTING_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_ROUTING_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/router.pb.h"
#include "runtime/router/routing/kv_aware_policy.h"
#include "runtime/router/routing/kv_prefix_index.h"

namespace lockstep::router {

struct KvRoutingStats {
  int64_t keys = 0;       // distinct keys in the index
  int64_t resyncs = 0;    // gaps seen (each asked for a snapshot)
  int64_t batches = 0;    // event batches received
  int64_t snapshots = 0;  // snapshots received
  std::vector<KvSourceStats> sources;
};

class KvRouting {
 public:
  struct Options {
    size_t max_keys = 1 << 20;  // router.kv_index_max_keys
  };
  explicit KvRouting(Options options);

  // Applies a report: snapshots, then batches. InvalidArgument (nothing applied) for
  // an empty instance name, incarnation 0 or tokens_per_block < 1.
  absl::StatusOr<v1::ReportKvEventsResponse> Apply(const v1::ReportKvEventsRequest& report)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The instance left, failed or registered anew: forget what it held until it reports
  // again (its next batch then asks for a snapshot).
  void RemoveInstance(const std::string& instance) ABSL_LOCKS_EXCLUDED(mu_);

  // Where a prompt's prefix is cached: for each instance that reported, its
  // tokens_per_block and the index's matches of the prompt's chain under its hashing.
  struct PrefixLookup {
    int64_t max_tokens = 0;  // the prompt minus its last token
    absl::flat_hash_map<std::string, std::pair<int32_t, std::vector<KvPrefixMatch>>> by_instance;
  };
  // Hashes the prompt once per scheme and matches it against the index (the costly
  // part: callers do it before taking their own locks).
  PrefixLookup Lookup(absl::Span<const int32_t> prompt) ABSL_LOCKS_EXCLUDED(mu_);
  // Sets each candidate's cached prefix (ApplyPrefixMatches, its best rank by tokens
  // weighted by tier); candidates of instances that never reported hold nothing.
  static void Fill(const PrefixLookup& lookup, std::vector<KvCandidate>* candidates,
                   const KvAwareWeights& weights = {});
  // Lookup, then Fill.
  void FillPrefixes(absl::Span<const int32_t> prompt, std::vector<KvCandidate>* candidates,
                    const KvAwareWeights& weights = {}) ABSL_LOCKS_EXCLUDED(mu_);

  KvRoutingStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // The keys the index holds for one rank in one tier, sorted (tests).
  std::vector<uint64_t> KeysOf(const std::string& instance, int32_t rank,
                               KvTier tier = KvTier::kDevice) const {
    return index_.KeysOf(instance, rank, tier);
  }

 private:
  struct Hashing {
    uint64_t salt = 0;
    int32_t tokens_per_block = 0;
    uint64_t incarnation = 0;
    bool operator==(const Hashing& o) const {
      return salt == o.salt && tokens_per_block == o.tokens_per_block;
    }
  };

  KvPrefixIndex index_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Hashing> hashing_ ABSL_GUARDED_BY(mu_);  // by instance
  int64_t batches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t snapshots_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_ROUTING_H_
