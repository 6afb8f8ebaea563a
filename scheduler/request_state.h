// Request states and types (docs/design.md §4), and the table of legal transitions.
//
// Chronological states: kContextInit -> kGenerationInProgress -> kGenerationToComplete
// -> kGenerationComplete. A generation-only request enters a generation instance as
// kGenInit (waiting for KV) -> kGenTransferInProgress -> kGenTransferComplete ->
// kGenerationInProgress. A context-only request whose prefill ended goes to
// kCtxTransferInProgress -> kCtxTransferComplete (or kTransferError, from
// kGenerationToComplete, when the send cannot start). Errors end in kTransferError or
// kError. Only kContextInit, kGenTransferComplete and kGenerationInProgress are
// schedulable.
#ifndef LOCKSTEP_SCHEDULER_REQUEST_STATE_H_
#define LOCKSTEP_SCHEDULER_REQUEST_STATE_H_

namespace lockstep::sched {

enum class RequestType { kAggregated, kContextOnly, kGenerationOnly };

enum class RequestState {
  kContextInit,            // prefill pending or in progress (also after a pause)
  kGenInit,                // generation-only: waiting for KV blocks and a receive
  kGenTransferInProgress,  // generation-only: KV being received
  kGenTransferComplete,    // generation-only: KV received; schedulable
  kGenerationInProgress,   // decoding
  kGenerationToComplete,   // will finish (or, context-only, hand off its KV) when the
                           // step in flight lands; not schedulable
  kGenerationComplete,     // finished (length, stop or cancelled)
  kCtxTransferInProgress,  // context-only: prefill done, KV being sent
  kCtxTransferComplete,    // context-only: KV sent
  kTransferError,          // a KV transfer failed
  kError,                  // failed for another reason
};

enum class FinishReason { kNone, kLength, kStop, kCancelled, kError };

const char* RequestTypeName(RequestType type);
const char* RequestStateName(RequestState state);
const char* FinishReasonName(FinishReason reason);

bool IsSchedulable(RequestState state);
bool IsTerminal(RequestState state);
// True for requests that hold a rank's slot but wait for KV (count toward the cap and
// the rank's load, never scheduled).
bool IsWaitingForKv(RequestState state);
bool IsLegalTransition(RequestState from, RequestState to);

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_REQUEST_STATE_H_
