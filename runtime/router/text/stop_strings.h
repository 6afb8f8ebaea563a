// Stop strings (the OpenAI `stop` parameter) over a stream of generated text.
//
// Text arrives in pieces (whatever the tokens and the detokenizer produce); the
// matcher returns what is final: everything except the longest tail that could still
// begin a stop string, which it holds back until the next piece settles it. At the
// first stop string the text before it is returned, the stop string and everything
// after it are dropped, and stopped() becomes true. So the output is the same however
// the text is split, and no byte of a stop string is ever returned.
//
//   StopStringMatcher stops({"\n\n", "END"});
//   send(stops.Push("Hello E"));   // "Hello " ("E" may begin "END")
//   send(stops.Push("N"));         // ""
//   send(stops.Push("Dgame"));     // "" and stopped()
//
// Pieces of valid UTF-8 in, valid UTF-8 out: a held-back tail starts where a stop
// string (valid UTF-8) could start, never inside a character. Thread-compatible.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TEXT_STOP_STRINGS_H_
#define LOCKSTEP_RUNTIME_ROUTER_TEXT_STOP_STRINGS_H_

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::router {

class StopStringMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops = {});

  // Appends `text`; returns the text that is now final (maybe empty). After a stop
  // string, returns "" forever.
  std::string Push(std::string_view text);
  // Ends the text: returns what was held back ("" after a stop string).
  std::string Flush();

  bool stopped() const { return stopped_; }
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // pending text: a proper prefix of some stop string ends it
  bool stopped_ = false;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_TEXT_STOP_STRINGS_H_
