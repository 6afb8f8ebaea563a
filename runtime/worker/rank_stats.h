// The executor's snapshot on the wire (proto/worker.proto StatsResponse): the instance's
// step counters and request gauges; attention-DP balance and prefix reuse (RankStats):
// every rank's load and prefix-reuse counters, and the instance's imbalance; and the
// target KV pool's shape (tokens per block, bytes per token) from its layout.
#ifndef LOCKSTEP_RUNTIME_WORKER_RANK_STATS_H_
#define LOCKSTEP_RUNTIME_WORKER_RANK_STATS_H_

#include "kvcache/block_layout.h"
#include "proto/worker.pb.h"
#include "runtime/executor/executor.h"

namespace lockstep::worker {

// The instance's counters (ExecutorCounters summed over ranks: steps, vetoes, tokens,
// transfers, errors, pauses) and its active and queued requests.
void SetInstanceCounters(const exec::ExecutorSnapshot& snapshot, v1::StatsResponse* out);

// `ranks`: one entry per rank of the snapshot, in rank order; `active_token_imbalance`.
void SetRankStats(const exec::ExecutorSnapshot& snapshot, v1::StatsResponse* out);

// `kv_tokens_per_block` and `kv_bytes_per_token` of the target pool's `layout` (the same
// on every rank of an instance).
void SetKvShape(const kv::BlockLayout& layout, v1::StatsResponse* out);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_RANK_STATS_H_
