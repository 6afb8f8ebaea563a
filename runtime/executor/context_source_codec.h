// The inter-rank codec of sched::ContextSource: where a request's KV waits on a context
// instance and what its context leg produced. Carried by the intake broadcast
// (generation-only requests) and the response gather (context-only hand-offs). The
// codec asserts the struct's field count, so a new field does not compile here until it
// is encoded (codec_test round-trips a value with every field set).
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_CONTEXT_SOURCE_CODEC_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_CONTEXT_SOURCE_CODEC_H_

#include "runtime/executor/wire.h"
#include "scheduler/request.h"

namespace lockstep::exec {

void PutContextSource(WireWriter& w, const sched::ContextSource& c);
// False when the input is truncated (`c` is then unspecified).
bool GetContextSource(WireReader& r, sched::ContextSource* c);

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_CONTEXT_SOURCE_CODEC_H_
