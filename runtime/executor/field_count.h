// FieldCount<T>(): the number of fields of the aggregate T (a struct with public
// fields, no bases, no user-declared constructors), counted at compile time as the
// most initializers `T{...}` accepts. Each hand-written codec asserts the count of the
// struct it converts, so a field added to the struct stops the codec from compiling
// until the codec carries it:
//
//   static_assert(FieldCount<sched::SamplingParams>() == 14,
//                 "a field was added to SamplingParams: encode it, then update 14");
//
// Thread safety: compile-time only.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_FIELD_COUNT_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_FIELD_COUNT_H_

#include <cstddef>
#include <type_traits>
#include <utility>

namespace lockstep::exec {
namespace internal {

// Converts to any field type (by reference, which avoids the ambiguity a by-value
// conversion has with the converting constructors of std::optional and the like).
struct AnyField {
  template <typename T>
  operator T&() const&&;
  template <typename T>
  operator T&&() const&&;
};

template <typename T, size_t... I>
constexpr bool BraceInitializableWith(std::index_sequence<I...>) {
  return requires { T{((void)I, AnyField{})...}; };
}

}  // namespace internal

template <typename T, size_t N = 0>
constexpr size_t FieldCount() {
  static_assert(std::is_aggregate_v<T>, "FieldCount needs an aggregate");
  if constexpr (internal::BraceInitializableWith<T>(std::make_index_sequence<N + 1>())) {
    return FieldCount<T, N + 1>();
  } else {
    return N;
  }
}

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_FIELD_COUNT_H_
