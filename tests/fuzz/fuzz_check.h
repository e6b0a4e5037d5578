// What the fuzz targets share: FUZZ_CHECK, an invariant that aborts with a
// message when it fails (libFuzzer and the replay program then report the
// input that broke it, exactly as for a sanitizer's finding).
#ifndef TRIBUTARY_TESTS_FUZZ_FUZZ_CHECK_H_
#define TRIBUTARY_TESTS_FUZZ_FUZZ_CHECK_H_

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// `what` is anything a std::string can be built from: what was expected and
// found.
#define FUZZ_CHECK(cond, what)                                                              \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                              \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

// Prints `what` (built only when verbose) when Verbose().
#define FUZZ_NOTE(what)                                                                          \
  do {                                                                                           \
    if (::tributary::fuzz::Verbose()) std::fprintf(stderr, "  %s\n", std::string(what).c_str()); \
  } while (0)

namespace tributary::fuzz {

// Silences protobuf's log (it reports every string field that is not UTF-8,
// which fuzzed input mostly is: noise, and slow). Call at the top of a target.
inline void QuietProtobuf() {
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
}

// True when TRIBUTARY_FUZZ_VERBOSE is set: FUZZ_NOTE then says what became
// of each input (to check that seeds reach what they are meant to, or to
// read a finding).
inline bool Verbose() {
  static const bool verbose = std::getenv("TRIBUTARY_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

}  // namespace tributary::fuzz

#endif  // TRIBUTARY_TESTS_FUZZ_FUZZ_CHECK_H_
