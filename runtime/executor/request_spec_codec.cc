#include "runtime/executor/request_spec_codec.h"

#include <cstdint>
#include <optional>

#include "runtime/executor/context_source_codec.h"
#include "runtime/executor/field_count.h"
#include "runtime/executor/sampling_codec.h"

namespace lockstep::exec {
namespace {

static_assert(FieldCount<NewRequestSpec>() == 8,
              "a field was added to NewRequestSpec: encode and decode it below, then update "
              "the count");

// An optional rank travels as -1 when absent.
void PutRank(WireWriter& w, const std::optional<int32_t>& rank) {
  w.Put<int32_t>(rank.value_or(-1));
}

bool GetRank(WireReader& r, std::optional<int32_t>* rank) {
  int32_t v = -1;
  if (!r.Get(&v) || v < -1) return false;
  if (v >= 0) *rank = v;
  return true;
}

}  // namespace

void PutRequestSpec(WireWriter& w, const NewRequestSpec& spec) {
  w.Put(spec.id.value());
  w.Put<uint8_t>(static_cast<uint8_t>(spec.type));
  w.PutVector(spec.prompt);
  PutSamplingParams(w, spec.sampling);
  w.PutBool(spec.context_source.has_value());
  if (spec.context_source) PutContextSource(w, *spec.context_source);
  PutRank(w, spec.pinned_rank);
  PutRank(w, spec.preferred_rank);
  w.Put(absl::ToUnixNanos(spec.arrival));
}

bool GetRequestSpec(WireReader& r, NewRequestSpec* spec) {
  int64_t id = 0, arrival = 0;
  uint8_t type = 0;
  bool has_source = false;
  if (!r.Get(&id) || !r.Get(&type) ||
      type > static_cast<uint8_t>(sched::RequestType::kGenerationOnly) ||
      !r.GetVector(&spec->prompt) || !GetSamplingParams(r, &spec->sampling) ||
      !r.GetBool(&has_source)) {
    return false;
  }
  if (has_source && !GetContextSource(r, &spec->context_source.emplace())) return false;
  if (!GetRank(r, &spec->pinned_rank) || !GetRank(r, &spec->preferred_rank) || !r.Get(&arrival)) {
    return false;
  }
  spec->id = RequestId(id);
  spec->type = static_cast<sched::RequestType>(type);
  spec->arrival = absl::FromUnixNanos(arrival);
  return true;
}

}  // namespace lockstep::exec
