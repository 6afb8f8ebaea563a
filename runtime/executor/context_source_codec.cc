#include "runtime/executor/context_source_codec.h"

#include <cstdint>

#include "absl/time/time.h"
#include "common/ids.h"
#include "runtime/executor/field_count.h"

namespace lockstep::exec {

static_assert(FieldCount<sched::ContextSource>() == 7,
              "a field was added to sched::ContextSource: encode and decode it below, then "
              "update the count");

void PutContextSource(WireWriter& w, const sched::ContextSource& c) {
  w.PutString(c.instance);
  w.Put(c.rank);
  w.PutString(c.address);
  w.Put(c.remote_id.value());
  w.Put(absl::ToUnixNanos(c.lease_expiry));
  w.Put(c.first_token);
  w.PutVector(c.first_drafts);
}

bool GetContextSource(WireReader& r, sched::ContextSource* c) {
  int64_t remote = 0, lease = 0;
  if (!r.GetString(&c->instance) || !r.Get(&c->rank) || !r.GetString(&c->address) ||
      !r.Get(&remote) || !r.Get(&lease) || !r.Get(&c->first_token) ||
      !r.GetVector(&c->first_drafts)) {
    return false;
  }
  c->remote_id = RequestId(remote);
  c->lease_expiry = absl::FromUnixNanos(lease);
  return true;
}

}  // namespace lockstep::exec
