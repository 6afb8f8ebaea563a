// What the leader's responses say about each request, collected for tests that compare
// whole runs. Written on the step thread that calls OnResponses; read by the test
// between steps. Not thread-safe.
#ifndef LOCKSTEP_TESTS_EXECUTOR_OUTCOME_SINK_H_
#define LOCKSTEP_TESTS_EXECUTOR_OUTCOME_SINK_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "runtime/executor/executor.h"

namespace lockstep::exec {

struct Outcome {
  std::vector<int32_t> tokens;  // every token streamed, in order
  bool finished = false;
  absl::Status status;     // of the final response
  int32_t rank = -1;       // the rank of the latest response
  int64_t proposed = 0;    // drafts, from the final response
  int64_t accepted = 0;
};

class OutcomeSink : public ResponseSink {
 public:
  void OnResponses(std::vector<Response> responses) override {
    for (Response& r : responses) {
      Outcome& o = outcomes[r.id];
      o.tokens.insert(o.tokens.end(), r.tokens.begin(), r.tokens.end());
      o.rank = r.rank;
      if (!r.finished) continue;
      o.finished = true;
      o.status = r.status;
      o.proposed = r.drafts_proposed;
      o.accepted = r.drafts_accepted;
    }
  }

  absl::flat_hash_map<RequestId, Outcome> outcomes;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_TESTS_EXECUTOR_OUTCOME_SINK_H_
