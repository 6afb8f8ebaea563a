// Every-field checks for the round-trip tests of hand-written codecs and conversions.
// They take a struct apart field by field (structured bindings, FieldCount), so they
// see a field the day it is added, without naming it:
//
//   const sched::SamplingParams want = FilledSamplingParams();
//   EXPECT_THAT(UnsetFields(want), IsEmpty());  // the filler sets every field
//   EXPECT_THAT(DifferingFields(Decode(Encode(want)), want), IsEmpty());
//
// A conversion that goes one way only (to a proto, say) is checked field by field with
// WithFieldReset: resetting any one field of a filled value must change the output
// (FieldIndex names the fields exempted on purpose).
//
// A field is named by its path of indices ("#12", "#9.3", "#4[0].1"). Aggregates
// (structs with public fields) are taken apart recursively, as are the elements of
// std::vector and the value of std::optional; anything else is compared with ==.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_TESTING_EVERY_FIELD_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_TESTING_EVERY_FIELD_H_

#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/executor/field_count.h"

namespace lockstep::exec::testing {
namespace internal {

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <typename T>
constexpr bool kIsStruct = std::conjunction_v<std::is_class<T>, std::is_aggregate<T>>;

}  // namespace internal

// A tuple of references to every field of `v` (an aggregate of at most 20 fields).
#define LOCKSTEP_FIELD_TIE_CASE(N, ...) \
  if constexpr (kFields == N) {         \
    auto& [__VA_ARGS__] = v;            \
    return std::tie(__VA_ARGS__);       \
  } else
template <typename T>
auto FieldTie(T& v) {
  constexpr size_t kFields = FieldCount<std::remove_const_t<T>>();
  static_assert(kFields >= 1 && kFields <= 20, "FieldTie takes 1 to 20 fields: add a case");
  LOCKSTEP_FIELD_TIE_CASE(1, a)
  LOCKSTEP_FIELD_TIE_CASE(2, a, b)
  LOCKSTEP_FIELD_TIE_CASE(3, a, b, c)
  LOCKSTEP_FIELD_TIE_CASE(4, a, b, c, d)
  LOCKSTEP_FIELD_TIE_CASE(5, a, b, c, d, e)
  LOCKSTEP_FIELD_TIE_CASE(6, a, b, c, d, e, f)
  LOCKSTEP_FIELD_TIE_CASE(7, a, b, c, d, e, f, g)
  LOCKSTEP_FIELD_TIE_CASE(8, a, b, c, d, e, f, g, h)
  LOCKSTEP_FIELD_TIE_CASE(9, a, b, c, d, e, f, g, h, i)
  LOCKSTEP_FIELD_TIE_CASE(10, a, b, c, d, e, f, g, h, i, j)
  LOCKSTEP_FIELD_TIE_CASE(11, a, b, c, d, e, f, g, h, i, j, k)
  LOCKSTEP_FIELD_TIE_CASE(12, a, b, c, d, e, f, g, h, i, j, k, l)
  LOCKSTEP_FIELD_TIE_CASE(13, a, b, c, d, e, f, g, h, i, j, k, l, m)
  LOCKSTEP_FIELD_TIE_CASE(14, a, b, c, d, e, f, g, h, i, j, k, l, m, n)
  LOCKSTEP_FIELD_TIE_CASE(15, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o)
  LOCKSTEP_FIELD_TIE_CASE(16, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p)
  LOCKSTEP_FIELD_TIE_CASE(17, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q)
  LOCKSTEP_FIELD_TIE_CASE(18, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r)
  LOCKSTEP_FIELD_TIE_CASE(19, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s)
  LOCKSTEP_FIELD_TIE_CASE(20, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t) {}
}
#undef LOCKSTEP_FIELD_TIE_CASE

template <typename T>
inline constexpr size_t kNumFields = FieldCount<T>();

// The index of the field of `v` that `member` points to (kNumFields<T> if none does).
template <typename T, typename M>
size_t FieldIndex(const T& v, const M* member) {
  size_t index = kNumFields<T>;
  auto tie = FieldTie(v);
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((static_cast<const void*>(&std::get<I>(tie)) == static_cast<const void*>(member)
          ? (void)(index = I)
          : (void)0),
     ...);
  }
  (std::make_index_sequence<std::tuple_size_v<decltype(tie)>>());
  return index;
}

// Copies field `index` of `from` into `to`.
template <typename T>
void CopyField(const T& from, T& to, size_t index) {
  auto src = FieldTie(from);
  auto dst = FieldTie(to);
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((I == index ? (void)(std::get<I>(dst) = std::get<I>(src)) : (void)0), ...);
  }
  (std::make_index_sequence<std::tuple_size_v<decltype(dst)>>());
}

// `v` with field `index` back at its default (T{}'s value).
template <typename T>
T WithFieldReset(T v, size_t index) {
  CopyField(T{}, v, index);
  return v;
}

// The fields (at every depth) of `v` that still hold the value of `defaults`: a
// vector must be non-empty, an optional must hold a value.
template <typename T>
void AppendUnset(const T& v, const T& defaults, const std::string& path,
                 std::vector<std::string>& out) {
  if constexpr (internal::kIsStruct<T>) {
    auto a = FieldTie(v);
    auto d = FieldTie(defaults);
    [&]<size_t... I>(std::index_sequence<I...>) {
      (AppendUnset(std::get<I>(a), std::get<I>(d), absl::StrCat(path, path.empty() ? "#" : ".", I),
                   out),
       ...);
    }
    (std::make_index_sequence<std::tuple_size_v<decltype(a)>>());
  } else if constexpr (internal::IsOptional<T>::value) {
    if (!v.has_value()) {
      out.push_back(path);
    } else if constexpr (internal::kIsStruct<typename T::value_type>) {
      AppendUnset(*v, typename T::value_type{}, path, out);
    }
  } else if constexpr (internal::IsVector<T>::value) {
    if (v.empty()) out.push_back(path);
    using E = typename T::value_type;
    if constexpr (internal::kIsStruct<E> || internal::IsVector<E>::value) {
      for (size_t i = 0; i < v.size(); ++i)
        AppendUnset(v[i], E{}, absl::StrCat(path, "[", i, "]"), out);
    }
  } else {
    if (v == defaults) out.push_back(path);
  }
}

template <typename T>
std::vector<std::string> UnsetFields(const T& v) {
  std::vector<std::string> out;
  AppendUnset(v, T{}, "", out);
  return out;
}

// The fields (at every depth) where `a` and `b` differ.
template <typename T>
void AppendDiffering(const T& a, const T& b, const std::string& path,
                     std::vector<std::string>& out) {
  if constexpr (internal::kIsStruct<T>) {
    auto x = FieldTie(a);
    auto y = FieldTie(b);
    [&]<size_t... I>(std::index_sequence<I...>) {
      (AppendDiffering(std::get<I>(x), std::get<I>(y),
                       absl::StrCat(path, path.empty() ? "#" : ".", I), out),
       ...);
    }
    (std::make_index_sequence<std::tuple_size_v<decltype(x)>>());
  } else if constexpr (internal::IsOptional<T>::value) {
    if (a.has_value() != b.has_value()) {
      out.push_back(path);
    } else if (a.has_value()) {
      AppendDiffering(*a, *b, path, out);
    }
  } else if constexpr (internal::IsVector<T>::value) {
    if (a.size() != b.size()) {
      out.push_back(absl::StrCat(path, " (size ", a.size(), " vs ", b.size(), ")"));
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      AppendDiffering(a[i], b[i], absl::StrCat(path, "[", i, "]"), out);
    }
  } else {
    if (!(a == b)) out.push_back(path);
  }
}

template <typename T>
std::vector<std::string> DifferingFields(const T& a, const T& b) {
  std::vector<std::string> out;
  AppendDiffering(a, b, "", out);
  return out;
}

}  // namespace lockstep::exec::testing

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_TESTING_EVERY_FIELD_H_
