// Values of the executor's wire types with every field (at every depth) set to a
// value unlike its default and unlike its neighbours', for the every-field round-trip
// tests of the codecs (codec_test) and of the conversions at the edge
// (runtime/worker/proto_convert_test). Each filler is checked by UnsetFields
// (every_field.h), so a field added to a struct fails those tests until the filler,
// and then the codec, carry it. The sampling parameters are valid for any vocabulary
// of more than 8 tokens.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_TESTING_FILLED_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_TESTING_FILLED_H_

#include "runtime/executor/intake.h"
#include "runtime/executor/response.h"

namespace lockstep::exec::testing {

sched::SamplingParams FilledSamplingParams();
sched::ContextSource FilledContextSource();
// A generation-only request (it carries a context source) with its sampling above.
NewRequestSpec FilledRequestSpec();
IntakeBatch FilledIntakeBatch();
// A final response with an error and a context source.
Response FilledResponse();

}  // namespace lockstep::exec::testing

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_TESTING_FILLED_H_
