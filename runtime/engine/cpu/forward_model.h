// ForwardModel: the model forward under the batch runner (batch_runner.h), the one
// piece an engine implements per device. The batch runner keeps everything else: the
// sequence state keyed by request id and cache generation, the KV contract
// (model_engine.h), the speculative passes and acceptance, and sampling.
//
// One call runs embedding -> every layer over the paged KV -> final norm and LM head
// for the requested rows, on a batch packed per step: a flat list of rows (token,
// position, sequence), each sequence's block table (and spec buffer), and the rows
// whose logits come back. The CPU transformer (transformer.h) computes in place; a
// device implementation (runtime/cuda/engine/) copies the packed input to the device
// in one transfer, runs the forward on its stream and copies the logits back before
// returning (the engine thread waits; the executor's Launch/Collect stay asynchronous
// because the runner runs on the engine's own thread, engine_thread.h).
//
// Where KV lives is the model's business: KvPoolView::storage and SequenceKv::spec
// point into host memory for the CPU transformer and into device memory (of the
// model's element type) for a device model, which makes its spec buffers
// (NewSpecBuffer) there.
//
// Thread-compatible: one engine thread calls it.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_FORWARD_MODEL_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_FORWARD_MODEL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kvcache/block_layout.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/paged_attention.h"
#include "runtime/engine/cpu/parallel.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model_engine.h"

namespace lockstep::engine {

struct ForwardRow {
  int32_t token = 0;
  int64_t position = 0;
  int32_t seq = 0;  // index into ForwardInput::seqs
};

// The rows of one sequence are contiguous and in increasing position; a row attends to
// every earlier position of its sequence (already in KV, or written by an earlier row
// of this forward).
struct ForwardInput {
  absl::Span<const ForwardRow> rows;
  absl::Span<const SequenceKv> seqs;
  absl::Span<const int32_t> logit_rows;  // rows whose logits are returned, in order
  // The step's agreement (model_engine.h) for the target's forward; this forward's
  // own values (not agreed) for any other.
  StepAgreement agreement;
  // Where set (the CPU transformer; MTP, runtime/engine/cpu/mtp_module.h): the rows'
  // input hidden states, [rows, hidden] (instead of the token embeddings), and where
  // the last layer's output hidden states (before the final norm) of every row go.
  const float* input_hidden = nullptr;
  float* hidden_out = nullptr;
};

// A sequence's spec buffer (SequenceKv::spec), where the model's Forward reads it.
class SpecBuffer {
 public:
  virtual ~SpecBuffer() = default;
  virtual float* data() = 0;
};

class ForwardModel {
 public:
  virtual ~ForwardModel() = default;

  virtual const ModelConfig& config() const = 0;

  // The block layout of this model's KV for `tokens_per_block`.
  virtual kv::BlockLayout Layout(int tokens_per_block) const = 0;

  // Runs the forward, reading and writing K/V in `pool` (each row's K/V is written at
  // its position: in the pool's blocks, or in the sequence's spec buffer from
  // spec_base on). Returns the logits, [logit_rows.size(), vocab] row-major floats on
  // the host, in `arena` or in the model's own (pinned) memory: valid until the
  // arena's next Reset or the model's next Forward, whichever comes first. Inputs are trusted
  // (validated by the caller): tokens in the vocabulary, block tables covering every position. Only
  // a Communicator (or device) failure is an error. Makes collectives_per_forward()
  // collectives, also with no rows. `threads` may be null; results do not depend on it.
  virtual absl::StatusOr<const float*> Forward(const ForwardInput& input, const KvPoolView& pool,
                                               Arena& arena, ThreadPool* threads) const = 0;

  // Copies the K/V of positions [begin, end) of every layer from where `from` keeps
  // them to where `to` does (the runner moves confirmed draft K/V out of a spec buffer
  // into the pool with it).
  virtual void CopyKv(const KvPoolView& pool, const SequenceKv& from, const SequenceKv& to,
                      int64_t begin, int64_t end) const = 0;

  // Collective calls one Forward makes, whatever its rows (expert parallelism).
  virtual int collectives_per_forward() const = 0;

  // A spec buffer for `tokens` positions of this model (SpecBufferFloats of its
  // layout), in the memory its Forward reads; released with the returned object. The
  // default is host memory (zero-filled), for models that compute on the host.
  virtual std::unique_ptr<SpecBuffer> NewSpecBuffer(int tokens) const;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_FORWARD_MODEL_H_
