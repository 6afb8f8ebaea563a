// Strong id types: a `RequestId` cannot be passed where a `BlockId` is expected.
//
//   RequestId id(42);
//   absl::flat_hash_map<RequestId, Request> requests;
//   LOCKSTEP_LOG_INFO("exec", "request {}", id);   // prints "42"
#ifndef LOCKSTEP_COMMON_IDS_H_
#define LOCKSTEP_COMMON_IDS_H_

#include <cstdint>
#include <functional>
#include <ostream>

#include "fmt/format.h"

namespace lockstep {

// An integer wrapped in a distinct type per `Tag`. Value type; trivially copyable.
template <typename Tag, typename T = int64_t>
class StrongId {
 public:
  using ValueType = T;

  constexpr StrongId() = default;
  constexpr explicit StrongId(T value) : value_(value) {}

  constexpr T value() const { return value_; }

  friend constexpr auto operator<=>(StrongId a, StrongId b) = default;

  template <typename H>
  friend H AbslHashValue(H h, StrongId id) {
    return H::combine(std::move(h), id.value_);
  }

  friend std::ostream& operator<<(std::ostream& os, StrongId id) { return os << id.value_; }

 private:
  T value_ = 0;
};

struct RequestIdTag {};
struct RankTag {};
struct StepIdTag {};
struct BlockIdTag {};

// A client request; unique within an instance. Negative ids are reserved for pad
// dummies (see kvcache).
using RequestId = StrongId<RequestIdTag, int64_t>;
// A rank of an instance (0 is the leader).
using Rank = StrongId<RankTag, int32_t>;
// A step of the executor loop on one instance; increases by one per step.
using StepId = StrongId<StepIdTag, int64_t>;
// A block index inside one KV pool.
using BlockId = StrongId<BlockIdTag, int32_t>;

}  // namespace lockstep

template <typename Tag, typename T>
struct std::hash<lockstep::StrongId<Tag, T>> {
  size_t operator()(lockstep::StrongId<Tag, T> id) const { return std::hash<T>()(id.value()); }
};

template <typename Tag, typename T>
struct fmt::formatter<lockstep::StrongId<Tag, T>> : fmt::formatter<T> {
  template <typename FormatContext>
  auto format(lockstep::StrongId<Tag, T> id, FormatContext& ctx) const {
    return fmt::formatter<T>::format(id.value(), ctx);
  }
};

#endif  // LOCKSTEP_COMMON_IDS_H_
