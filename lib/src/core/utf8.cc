#include "tributary/utf8.h"

#include <utf8proc.h>

#include <cstdint>
#include <cstring>

namespace tributary {

namespace {

// The length of the valid UTF-8 sequence at s[i], or 0 (utf8proc's
// definition: RFC 3629, no surrogates, no overlong forms).
size_t SequenceAt(std::string_view s, size_t i, utf8proc_int32_t* cp) {
  const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                              static_cast<utf8proc_ssize_t>(s.size() - i), cp);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

std::string Hex(unsigned char b) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out = "\\x";
  out += kDigits[b >> 4];
  out += kDigits[b & 15];
  return out;
}

}  // namespace

size_t InvalidUtf8At(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (i + 8 <= s.size()) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const size_t n = SequenceAt(s, i, &cp);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string Utf8Error(std::string_view s) {
  const size_t at = InvalidUtf8At(s);
  if (at == std::string_view::npos) return std::string();
  std::string hex = Hex(static_cast<unsigned char>(s[at]));
  hex[0] = '0';  // "0xff"
  return "expected UTF-8, found an invalid byte " + hex + " at byte " + std::to_string(at) + " (of " +
         std::to_string(s.size()) + ")";
}

std::string Printable(std::string_view s, size_t max_bytes) {
  std::string out;
  const size_t end = s.size() < max_bytes ? s.size() : max_bytes;
  size_t i = 0;
  while (i < end) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7f) {
      if (b == '\\') out += '\\';
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const size_t n = b >= 0x80 ? SequenceAt(s, i, &cp) : 0;
    // Valid, not a control (C1 controls U+0080..U+009F drive terminals too),
    // and whole within the cut.
    if (n > 0 && i + n <= end && utf8proc_category(cp) != UTF8PROC_CATEGORY_CC) {
      out.append(s.data() + i, n);
      i += n;
      continue;
    }
    out += Hex(b);
    ++i;
  }
  if (end < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace tributary
