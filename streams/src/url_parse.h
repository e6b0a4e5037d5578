// Private to the broker sources (redis_source.cc, kafka_url.cc): the small
// pieces their URL parsers share.
#ifndef TRIBUTARY_STREAMS_SRC_URL_PARSE_H_
#define TRIBUTARY_STREAMS_SRC_URL_PARSE_H_

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tributary/status.h"
#include "tributary/utf8.h"

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

// How a parser reports a bad part: "<scheme> source URL '...': PART:
// expected EXPECTED, found FOUND" (each source redacts what it must).
using ErrorFn = std::function<Status(std::string_view part, std::string_view expected, std::string_view found)>;

// A source URL SCHEME://AUTHORITY/NAME[?QUERY], split.
struct UrlParts {
  std::string_view authority;  // between "://" and the first '/'
  std::string name;            // the path after '/', %-decoded, not empty
  std::string_view query;      // after '?' (empty: none)
};

// Splits `url` of scheme `scheme` ("redis://"); `name_part` names the path
// in errors ("stream", "topic") and `name_expected` says where it goes
// ("'/STREAM' after HOST:PORT"). Refuses another scheme, a #fragment, a
// missing or empty name and malformed escapes.
inline Status SplitUrl(std::string_view url, std::string_view scheme, const std::string& name_part,
                       std::string_view name_expected, const ErrorFn& error, UrlParts* out) {
  if (url.substr(0, scheme.size()) != scheme) {
    const size_t sep = url.find("://");
    return error("scheme", Quoted(scheme),
                 sep == std::string_view::npos ? "no scheme" : Quoted(url.substr(0, sep + 3)));
  }
  std::string_view rest = url.substr(scheme.size());
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos) {
    return error("fragment", "no '#fragment'", Quoted(rest.substr(hash)));
  }
  const size_t slash = rest.find('/');
  const size_t question = rest.find('?');
  if (slash == std::string_view::npos || (question != std::string_view::npos && question < slash)) {
    return error(name_part, name_expected, "none");
  }
  out->authority = rest.substr(0, slash);
  const std::string_view path_and_query = rest.substr(slash + 1);
  const size_t q = path_and_query.find('?');
  if (!PercentDecode(path_and_query.substr(0, q), &out->name)) {
    return error(name_part, "valid %XX escapes", "a malformed escape");
  }
  if (out->name.empty()) return error(name_part, "a " + name_part + " name after '/'", "none");
  out->query = q == std::string_view::npos ? std::string_view() : path_and_query.substr(q + 1);
  return Status::OK();
}

// Calls `fn(name, value, part)` for each NAME=VALUE of `query` in order
// (value %-decoded; part = "parameter 'NAME'", for errors); refuses a
// parameter without '=', a malformed escape and a name given twice.
inline Status ForEachParameter(
    std::string_view query, const ErrorFn& error,
    const std::function<Status(const std::string&, const std::string&, const std::string&)>& fn) {
  std::vector<std::string> seen;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (param.empty()) continue;
    const size_t eq = param.find('=');
    if (eq == std::string_view::npos) return error("parameter", "NAME=VALUE", Quoted(param));
    const std::string name(param.substr(0, eq));
    const std::string part = "parameter " + Quoted(name);
    std::string value;
    if (!PercentDecode(param.substr(eq + 1), &value)) return error(part, "valid %XX escapes", "a malformed escape");
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) return error(part, "each parameter once", "it twice");
    seen.push_back(name);
    TRIB_RETURN_IF_ERROR(fn(name, value, part));
  }
  return Status::OK();
}

// The rules for a parameter's value that both sources apply (`part` as
// ForEachParameter gives it; errors through `error`):
//
// A name (a consumer group, a consumer, a dead-letter stream, a client id):
// not empty, and UTF-8, since it goes into every log record's source
// position (a proto3 string): one that is not UTF-8 would make the log
// unreadable.
inline Status NameParameter(const ErrorFn& error, const std::string& part, const std::string& value, std::string* out) {
  if (value.empty()) return error(part, "a non-empty name", "an empty value");
  if (std::string why = Utf8Error(value); !why.empty()) return error(part, "a UTF-8 name", why);
  *out = value;
  return Status::OK();
}

// A number in [min, max] ("batch"); `unit` names what it counts in the error
// ("a number of milliseconds in 0..3600000"), empty for a plain number.
template <typename T>
Status NumberParameter(const ErrorFn& error, const std::string& part, std::string_view value, T min, T max, T* out,
                       std::string_view unit = {}) {
  if (ParseUnsigned<T>(value, min, max, out)) return Status::OK();
  return error(part,
               "a number " + (unit.empty() ? std::string() : "of " + std::string(unit) + " ") + "in " +
                   std::to_string(min) + ".." + std::to_string(max),
               Quoted(value));
}

}  // namespace tributary::url_parse

#endif  // TRIBUTARY_STREAMS_SRC_URL_PARSE_H_
