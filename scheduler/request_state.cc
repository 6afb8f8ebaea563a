#include "scheduler/request_state.h"

namespace lockstep::sched {

const char* RequestTypeName(RequestType type) {
  switch (type) {
    case RequestType::kAggregated:
      return "aggregated";
    case RequestType::kContextOnly:
      return "context_only";
    case RequestType::kGenerationOnly:
      return "generation_only";
  }
  return "?";
}

const char* RequestStateName(RequestState state) {
  switch (state) {
    case RequestState::kContextInit:
      return "context_init";
    case RequestState::kGenInit:
      return "gen_init";
    case RequestState::kGenTransferInProgress:
      return "gen_transfer_in_progress";
    case RequestState::kGenTransferComplete:
      return "gen_transfer_complete";
    case RequestState::kGenerationInProgress:
      return "generation_in_progress";
    case RequestState::kGenerationToComplete:
      return "generation_to_complete";
    case RequestState::kGenerationComplete:
      return "generation_complete";
    case RequestState::kCtxTransferInProgress:
      return "ctx_transfer_in_progress";
    case RequestState::kCtxTransferComplete:
      return "ctx_transfer_complete";
    case RequestState::kTransferError:
      return "transfer_error";
    case RequestState::kError:
      return "error";
  }
  return "?";
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

bool IsSchedulable(RequestState state) {
  return state == RequestState::kContextInit || state == RequestState::kGenTransferComplete ||
         state == RequestState::kGenerationInProgress;
}

bool IsTerminal(RequestState state) {
  return state == RequestState::kGenerationComplete ||
         state == RequestState::kCtxTransferComplete || state == RequestState::kTransferError ||
         state == RequestState::kError;
}

bool IsWaitingForKv(RequestState state) {
  return state == RequestState::kGenInit || state == RequestState::kGenTransferInProgress;
}

bool IsLegalTransition(RequestState from, RequestState to) {
  using S = RequestState;
  if (IsTerminal(from)) return false;
  // Any live request can fail or be cancelled (cancelled ends in kGenerationComplete).
  if (to == S::kError || to == S::kGenerationComplete) return true;
  switch (from) {
    case S::kContextInit:
      // Restart of a paused request, decoding after the last chunk, or the context-only
      // hand-off.
      return to == S::kContextInit || to == S::kGenerationInProgress ||
             to == S::kGenerationToComplete || to == S::kCtxTransferInProgress;
    case S::kGenInit:
      return to == S::kGenTransferInProgress || to == S::kTransferError;
    case S::kGenTransferInProgress:
      return to == S::kGenTransferComplete || to == S::kTransferError;
    case S::kGenTransferComplete:
      return to == S::kGenerationInProgress || to == S::kGenerationToComplete ||
             to == S::kContextInit;
    case S::kGenerationInProgress:
      return to == S::kGenerationToComplete || to == S::kContextInit;
    case S::kGenerationToComplete:
      // A context-only request whose last chunk is in flight hands off its KV next, or
      // fails if the send cannot start.
      return to == S::kCtxTransferInProgress || to == S::kTransferError;
    case S::kCtxTransferInProgress:
      return to == S::kCtxTransferComplete || to == S::kTransferError;
    default:
      return false;
  }
}

}  // namespace lockstep::sched
