// UTF-8 at the doors: the one rule every way in applies to the text it is
// given (Document.id, label, tokens and text; names read from URLs), so that
// nothing that protobuf would refuse to parse back (proto3 strings must be
// UTF-8) is ever acknowledged, logged or snapshotted. The HTTP API's JSON
// parser and protobuf's own parse apply the same definition: well-formed
// UTF-8 (RFC 3629), no surrogates, nothing above U+10FFFF, no overlong forms.
#ifndef TRIBUTARY_UTF8_H_
#define TRIBUTARY_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace tributary {

/// The byte offset of the first byte of `s` that does not begin a valid UTF-8
/// sequence, or std::string_view::npos when all of `s` is valid UTF-8.
/// O(size); ASCII is scanned eight bytes at a time.
size_t InvalidUtf8At(std::string_view s);

/// Empty when `s` is valid UTF-8; else the reason, naming the byte:
/// "expected UTF-8, found an invalid byte 0xff at byte 4 (of 12)".
std::string Utf8Error(std::string_view s);

/// `s` made safe to print in an error message or a log line: printable ASCII
/// and valid non-control UTF-8 stay as they are, every other byte (controls
/// such as ESC, which would drive a terminal; invalid UTF-8) becomes \xNN, a
/// backslash becomes \\. Cut after `max_bytes` bytes of input with "..." (the
/// size said when cut). Never fails.
std::string Printable(std::string_view s, size_t max_bytes = 256);

}  // namespace tributary

#endif  // TRIBUTARY_UTF8_H_
