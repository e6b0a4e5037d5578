// Private to the sources (redis_source.cc, kafka_source.cc): the small
// pieces their URL parsers share.
#ifndef TRIBUTARY_STREAMS_SRC_URL_PARSE_H_
#define TRIBUTARY_STREAMS_SRC_URL_PARSE_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace tributary::url_parse {

inline std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

inline int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes; false on a malformed escape.
inline bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = HexValue(in[i + 1]);
    const int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// A decimal number in [min, max], nothing else in `s`.
template <typename T>
bool ParseUnsigned(std::string_view s, T min, T max, T* out) {
  uint64_t v = 0;
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return false;
  if (v < static_cast<uint64_t>(min) || v > static_cast<uint64_t>(max)) return false;
  *out = static_cast<T>(v);
  return true;
}

}  // namespace tributary::url_parse

#endif  // TRIBUTARY_STREAMS_SRC_URL_PARSE_H_
