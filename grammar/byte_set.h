// File: byte_set.h
//
// A set of byte values (256 bits): the terminal of the byte-level grammars.
#ifndef LOCKSTEP_GRAMMAR_BYTE_SET_H_
#define LOCKSTEP_GRAMMAR_BYTE_SET_H_

#include <array>
#include <cstdint>

namespace lockstep::grammar {

class ByteSet {
 public:
  ByteSet() = default;
  static ByteSet Of(uint8_t byte) {
    ByteSet s;
    s.Add(byte);
    return s;
  }
  static ByteSet Range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.AddRange(lo, hi);
    return s;
  }
  static ByteSet All() { return ByteSet().Inverted(); }

  bool Contains(uint8_t byte) const { return (words_[byte >> 6] >> (byte & 63)) & 1; }
  void Add(uint8_t byte) { words_[byte >> 6] |= uint64_t{1} << (byte & 63); }
  void Remove(uint8_t byte) { words_[byte >> 6] &= ~(uint64_t{1} << (byte & 63)); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  void AddAll(const ByteSet& other) {
    for (int i = 0; i < 4; ++i) words_[i] |= other.words_[i];
  }
  void RemoveAll(const ByteSet& other) {
    for (int i = 0; i < 4; ++i) words_[i] &= ~other.words_[i];
  }
  ByteSet Inverted() const {
    ByteSet s;
    for (int i = 0; i < 4; ++i) s.words_[i] = ~words_[i];
    return s;
  }
  bool Empty() const { return (words_[0] | words_[1] | words_[2] | words_[3]) == 0; }
  int Count() const {
    int n = 0;
    for (uint64_t w : words_) n += __builtin_popcountll(w);
    return n;
  }
  bool operator==(const ByteSet&) const = default;

 private:
  std::array<uint64_t, 4> words_{};
};

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_BYTE_SET_H_
