// The inter-rank codec of sched::SamplingParams (part of the intake broadcast, wire.h).
// Every field travels: the codec asserts the struct's field count, so a field added to
// SamplingParams does not compile here until it is encoded (codec_test round-trips a
// value with every field set).
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_SAMPLING_CODEC_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_SAMPLING_CODEC_H_

#include "runtime/executor/wire.h"
#include "scheduler/sampling_params.h"

namespace lockstep::exec {

void PutSamplingParams(WireWriter& w, const sched::SamplingParams& s);
// False when the input is truncated or malformed (`s` is then unspecified).
bool GetSamplingParams(WireReader& r, sched::SamplingParams* s);

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_SAMPLING_CODEC_H_
