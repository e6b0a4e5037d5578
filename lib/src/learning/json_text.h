// JSON text for the library's reports (TrainReport, LiveLearner): the
// library writes a few small objects and links no JSON library.
#ifndef TRIBUTARY_SRC_JSON_TEXT_H_
#define TRIBUTARY_SRC_JSON_TEXT_H_

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

namespace tributary {

/// `s` as a JSON string literal (quotes, backslashes and control bytes escaped).
inline std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

/// `x` as a JSON number; null when not finite.
inline std::string JsonNumber(double x) {
  if (!std::isfinite(x)) return "null";
  std::ostringstream os;
  os.precision(10);
  os << x;
  return os.str();
}

}  // namespace tributary

#endif  // TRIBUTARY_SRC_JSON_TEXT_H_
