// The inter-rank codec of NewRequestSpec (the intake broadcast carries one per new
// request). Every field travels, the sampling parameters and the context source
// through their own codecs; the codec asserts the struct's field count, so a new field
// does not compile here until it is encoded (codec_test round-trips a value with every
// field set).
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_REQUEST_SPEC_CODEC_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_REQUEST_SPEC_CODEC_H_

#include "runtime/executor/request_spec.h"
#include "runtime/executor/wire.h"

namespace lockstep::exec {

void PutRequestSpec(WireWriter& w, const NewRequestSpec& spec);
// False when the input is truncated or malformed (an unknown request type, a negative
// rank): `spec` is then unspecified.
bool GetRequestSpec(WireReader& r, NewRequestSpec* spec);

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_REQUEST_SPEC_CODEC_H_
