// A minimal binary codec for what the executor exchanges between ranks (intake
// broadcast, load all-gather, response gather). Little-endian, length-prefixed; the
// reader reports truncation instead of reading past the end. Wire types of the
// control plane (protobuf) stay at the edge; these bytes never leave an instance.
// One codec per type (sampling_codec.h, context_source_codec.h, request_spec_codec.h,
// IntakeBatch in intake.h, Response in response.h), each asserting its struct's field
// count (field_count.h) and round-tripped with every field set by codec_test.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_WIRE_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"

namespace lockstep::exec {

class WireWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void PutBool(bool b) { Put<uint8_t>(b ? 1 : 0); }
  void PutString(absl::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  template <typename T>
  void PutVector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put<uint32_t>(static_cast<uint32_t>(v.size()));
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string Take() { return std::move(out_); }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

class WireReader {
 public:
  explicit WireReader(absl::string_view in) : in_(in) {}

  template <typename T>
  bool Get(T* v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (in_.size() - pos_ < sizeof(T)) return Fail();
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // Refuses a byte other than 0 and 1 (a bool must not be read from any other value).
  bool GetBool(bool* b) {
    uint8_t v = 0;
    if (!Get(&v) || v > 1) return Fail();
    *b = v != 0;
    return true;
  }
  bool GetString(std::string* s) {
    uint32_t n = 0;
    if (!Get(&n) || in_.size() - pos_ < n) return Fail();
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool GetVector(std::vector<T>* v) {
    static_assert(std::is_trivially_copyable_v<T>);
    uint32_t n = 0;
    if (!Get(&n) || (in_.size() - pos_) / sizeof(T) < n) return Fail();
    v->resize(n);
    if (n > 0) std::memcpy(v->data(), in_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  bool done() const { return pos_ == in_.size(); }
  bool ok() const { return ok_; }

 private:
  bool Fail() {
    ok_ = false;
    return false;
  }
  absl::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_WIRE_H_
