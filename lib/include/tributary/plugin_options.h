// Declarative option tables for plugins (header-only C++, on top of the
// trib_option_spec of plugin_abi.h; included by plugin_sdk.h).
//
// A plugin describes every option its create() accepts once, as a constexpr
// array ending with an empty entry:
//
//   constexpr trib_option_spec kOptions[] = {
//       sdk::Number("prior", "1", "pseudo-count of every word").Above(0).Words("laplace|log"),
//       sdk::Integer("topics", "10", "number of topics K").AtLeast(1).AtMost(100000),
//       sdk::Choice("inference", "cvb0|vi|gibbs", "cvb0", "the local step"),
//       sdk::Number("alpha", "1/K", "document-topic prior").Above(0).Derived(),
//       sdk::Alias("eta_prior", "prior"),
//       {},
//   };
//   TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);   // the host can show it (optional)
//
// and create() reads typed values, the table's defaults for options not given:
//
//   sdk::OptionValues o;
//   if (int rc = sdk::ParseOptions(kOptions, TRIB_KIND_FAMILY, "mine", opts, n, &o, err); rc != TRIB_OK) return rc;
//   m->K = o.Integer<uint32_t>("topics");
//   if (o.IsSet("alpha")) m->alpha = o.Number("alpha"); else m->alpha = 1.0 / m->K;
//
// ParseOptions refuses (TRIB_ERR_INVALID_ARGUMENT) an unknown key with
//   unknown option 'colour' for family mine (known: prior, topics, inference, alpha, eta_prior)
// and a bad value with the value found and what the table expects:
//   option topics='0': expected an integer in [1, 100000]
// An option given twice takes its last value (an alias sets its option).
//
// Nothing here crosses the ABI boundary except the table itself.
#ifndef TRIBUTARY_PLUGIN_OPTIONS_H_
#define TRIBUTARY_PLUGIN_OPTIONS_H_

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tributary/plugin_abi.h"

namespace tributary::sdk {

// ---- Building a table ---------------------------------------------------------

/// One entry of an option table under construction; converts to the
/// trib_option_spec of the ABI. Every member function is constexpr, so a
/// table of them is constant data (no code runs when the plugin is loaded).
class Option {
 public:
  /// An entry `name` of `type` (TRIB_OPTION_*) with default text `default_value` (NULL: none) and one-line
  /// `help`, its range unbounded. The factories below (Number, Integer, ...) are the usual way to make one.
  constexpr Option(const char* name, uint32_t type, const char* default_value, const char* help)
      : spec_{name,
              type,
              0u,
              -std::numeric_limits<double>::infinity(),
              std::numeric_limits<double>::infinity(),
              default_value,
              nullptr,
              help,
              nullptr} {}

  /// Range of a NUMBER or INTEGER: the value must be > lo.
  constexpr Option Above(double lo) const { return WithMin(lo, true); }
  /// Range of a NUMBER or INTEGER: the value must be >= lo.
  constexpr Option AtLeast(double lo) const { return WithMin(lo, false); }
  /// Range of a NUMBER or INTEGER: the value must be < hi.
  constexpr Option Below(double hi) const { return WithMax(hi, true); }
  /// Range of a NUMBER or INTEGER: the value must be <= hi.
  constexpr Option AtMost(double hi) const { return WithMax(hi, false); }
  /// Words a NUMBER or INTEGER accepts besides numbers ("laplace|log").
  constexpr Option Words(const char* words) const {
    Option o = *this;
    o.spec_.choices = words;
    return o;
  }
  /// The default text describes a value the plugin derives ("1/K"): when the
  /// option is not given, OptionValues::IsSet and HasValue are false.
  constexpr Option Derived() const {
    Option o = *this;
    o.spec_.flags |= TRIB_OPTION_DERIVED_DEFAULT;
    return o;
  }

  /// The entry as the ABI's trib_option_spec: what the table's array holds.
  constexpr operator trib_option_spec() const { return spec_; }  // NOLINT(google-explicit-constructor)

 private:
  friend constexpr Option Choice(const char*, const char*, const char*, const char*);
  friend constexpr Option Alias(const char*, const char*);
  constexpr Option WithMin(double lo, bool exclusive) const {
    Option o = *this;
    o.spec_.min = lo;
    o.spec_.flags =
        exclusive ? (o.spec_.flags | TRIB_OPTION_MIN_EXCLUSIVE) : (o.spec_.flags & ~TRIB_OPTION_MIN_EXCLUSIVE);
    return o;
  }
  constexpr Option WithMax(double hi, bool exclusive) const {
    Option o = *this;
    o.spec_.max = hi;
    o.spec_.flags =
        exclusive ? (o.spec_.flags | TRIB_OPTION_MAX_EXCLUSIVE) : (o.spec_.flags & ~TRIB_OPTION_MAX_EXCLUSIVE);
    return o;
  }
  trib_option_spec spec_;
};

/// A finite number (strtod's syntax).
constexpr Option Number(const char* name, const char* default_value, const char* help) {
  return Option(name, TRIB_OPTION_NUMBER, default_value, help);
}
/// A number with an integral value ("12", also "12.0" and "1e3").
constexpr Option Integer(const char* name, const char* default_value, const char* help) {
  return Option(name, TRIB_OPTION_INTEGER, default_value, help);
}
/// 0, 1, false or true.
constexpr Option Boolean(const char* name, const char* default_value, const char* help) {
  return Option(name, TRIB_OPTION_BOOLEAN, default_value, help);
}
/// Any text.
constexpr Option String(const char* name, const char* default_value, const char* help) {
  return Option(name, TRIB_OPTION_STRING, default_value, help);
}
/// One of `choices`, '|'-separated ("cvb0|vi|gibbs").
constexpr Option Choice(const char* name, const char* choices, const char* default_value, const char* help) {
  Option o(name, TRIB_OPTION_CHOICE, default_value, help);
  o.spec_.choices = choices;
  return o;
}
/// `name` is another spelling of option `of` (an earlier entry of the table).
constexpr Option Alias(const char* name, const char* of) {
  Option o(name, TRIB_OPTION_ALIAS, nullptr, nullptr);
  o.spec_.alias_of = of;
  return o;
}

/// True when `table` (a whole array) is well formed: it ends with an empty
/// entry and only there, names are distinct and [a-z0-9_-]+, types are known,
/// every alias names an earlier non-alias entry, every CHOICE has choices.
/// TRIBUTARY_DEFINE_PLUGIN_OPTIONS checks it at compile time.
template <size_t N>
constexpr bool ValidOptionTable(const trib_option_spec (&table)[N]) {
  if (table[N - 1].name != nullptr) return false;
  for (size_t i = 0; i + 1 < N; ++i) {
    const trib_option_spec& s = table[i];
    if (s.name == nullptr || s.name[0] == '\0') return false;
    for (const char* p = s.name; *p; ++p) {
      const char c = *p;
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    }
    if (s.type < TRIB_OPTION_NUMBER || s.type > TRIB_OPTION_ALIAS) return false;
    if (s.type == TRIB_OPTION_CHOICE && (s.choices == nullptr || s.choices[0] == '\0')) return false;
    if (!(s.min <= s.max)) return false;
    bool alias_ok = s.type != TRIB_OPTION_ALIAS;
    for (size_t j = 0; j < i; ++j) {
      if (std::string_view(table[j].name) == s.name) return false;
      if (!alias_ok && s.alias_of != nullptr && table[j].type != TRIB_OPTION_ALIAS &&
          std::string_view(table[j].name) == s.alias_of) {
        alias_ok = true;
      }
    }
    if (!alias_ok) return false;
  }
  return true;
}

// ---- Descriptions (shared with the host, which shows the same words) ----------

/// A number as people write it: 1, 0.5, 100000, 1e100, 1e-05 -> "1e-5".
inline std::string FormatOptionNumber(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e7) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%g", v);
  std::string s = buf;
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  std::string sign;
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) {
    if (exp[0] == '-') sign = "-";
    exp.erase(0, 1);
  }
  while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
  return mant + "e" + sign + exp;
}

/// The '|'-separated words of `choices` (empty for NULL).
inline std::vector<std::string> SplitOptionWords(const char* choices) {
  std::vector<std::string> out;
  if (choices == nullptr || *choices == '\0') return out;
  std::string_view s(choices);
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('|', start);
    if (end == std::string_view::npos) end = s.size();
    out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

/// "a, b or c".
inline std::string JoinOptionWords(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

/// The range of a NUMBER / INTEGER in words: " > 0", " in [1, 100000]",
/// " > 0 and <= 1e100", "" when unbounded.
inline std::string DescribeOptionRange(uint32_t flags, double min, double max) {
  const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
  const bool min_ex = (flags & TRIB_OPTION_MIN_EXCLUSIVE) != 0, max_ex = (flags & TRIB_OPTION_MAX_EXCLUSIVE) != 0;
  if (has_min && has_max && !min_ex && !max_ex) {
    return " in [" + FormatOptionNumber(min) + ", " + FormatOptionNumber(max) + "]";
  }
  std::string out;
  if (has_min) out += std::string(min_ex ? " > " : " >= ") + FormatOptionNumber(min);
  if (has_max) out += std::string(has_min ? " and" : "") + (max_ex ? " < " : " <= ") + FormatOptionNumber(max);
  return out;
}

/// What a value of this option must be, for "expected ..." messages:
/// "a number > 0", "laplace, log or a number > 0", "an integer in [1, 10]",
/// "cvb0, vi or gibbs", "0, 1, false or true", "any text".
inline std::string DescribeOptionExpected(uint32_t type, uint32_t flags, double min, double max, const char* choices) {
  std::vector<std::string> words = SplitOptionWords(choices);
  switch (type) {
    case TRIB_OPTION_NUMBER:
    case TRIB_OPTION_INTEGER:
      words.push_back(std::string(type == TRIB_OPTION_NUMBER ? "a number" : "an integer") +
                      DescribeOptionRange(flags, min, max));
      return JoinOptionWords(words);
    case TRIB_OPTION_BOOLEAN:
      return "0, 1, false or true";
    case TRIB_OPTION_CHOICE:
      return JoinOptionWords(words);
    case TRIB_OPTION_STRING:
      return "any text";
    default:
      return "a value";
  }
}

/// The type's name as `tributary plugins --options` shows it.
inline const char* OptionTypeName(uint32_t type) {
  switch (type) {
    case TRIB_OPTION_NUMBER:
      return "number";
    case TRIB_OPTION_INTEGER:
      return "integer";
    case TRIB_OPTION_BOOLEAN:
      return "boolean";
    case TRIB_OPTION_STRING:
      return "string";
    case TRIB_OPTION_CHOICE:
      return "choice";
    case TRIB_OPTION_ALIAS:
      return "alias";
    default:
      return "unknown";
  }
}

// ---- Parsing ------------------------------------------------------------------

/// A typed value of one option.
struct OptionValue {
  bool given = false;      ///< set by the caller (under its name or an alias)
  bool has_value = false;  ///< given, or a (non-derived) default
  std::string text;        ///< what was given, or the default's text
  double number = 0;       ///< NUMBER / INTEGER (NaN when `text` is one of the words)
  int64_t integer = 0;     ///< INTEGER
  bool flag = false;       ///< BOOLEAN
};

class OptionValues;
inline int ParseOptions(const trib_option_spec* table, trib_plugin_kind kind, const char* name, const trib_option* opts,
                        size_t num_opts, OptionValues* out, trib_error* err);

/// The values ParseOptions found, one per entry of the table. Looking up a
/// name the table lacks, or reading a value of another type, is a bug in the
/// plugin: it throws std::logic_error (which Guard turns into
/// TRIB_ERR_INTERNAL).
class OptionValues {
 public:
  /// True when the caller gave the option (under any of its names).
  bool IsSet(const char* name) const { return Get(name).given; }
  /// True when the option has a value: given, or a default that is not derived.
  bool HasValue(const char* name) const { return Get(name).has_value; }
  /// The text given, or the default's text ("" for a derived default).
  const std::string& Text(const char* name) const { return Get(name).text; }
  /// True when the value is `word` (a CHOICE, or a word of a NUMBER / INTEGER).
  bool Is(const char* name, const char* word) const {
    const OptionValue& v = Get(name);
    return v.has_value && v.text == word;
  }
  /// NUMBER or INTEGER (NaN for a word); REQUIRES: HasValue(name).
  double Number(const char* name) const {
    const size_t i = Index(name);
    Require(i, TRIB_OPTION_NUMBER, TRIB_OPTION_INTEGER);
    return values_[i].number;
  }
  /// INTEGER, converted to T (the table's range must fit T); REQUIRES: HasValue(name).
  template <typename T = int64_t>
  T Integer(const char* name) const {
    const size_t i = Index(name);
    Require(i, TRIB_OPTION_INTEGER, TRIB_OPTION_INTEGER);
    if (std::isnan(values_[i].number)) {
      throw std::logic_error(std::string("option ") + name + " is the word '" + values_[i].text + "', not an integer");
    }
    const int64_t v = values_[i].integer;
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
      throw std::logic_error(std::string("option ") + name + " = " + values_[i].text + " does not fit its C++ type");
    }
    return static_cast<T>(v);
  }
  /// BOOLEAN; REQUIRES: HasValue(name).
  bool Flag(const char* name) const {
    const size_t i = Index(name);
    Require(i, TRIB_OPTION_BOOLEAN, TRIB_OPTION_BOOLEAN);
    return values_[i].flag;
  }
  /// The index in `opts` of the last option that set `name` (under any of its
  /// names), or -1: for rules about the order of options.
  long Position(const char* name) const { return positions_[Index(name)]; }

  /// The table ParseOptions read these values against; NULL before ParseOptions ran.
  const trib_option_spec* table() const { return table_; }

 private:
  friend int ParseOptions(const trib_option_spec*, trib_plugin_kind, const char*, const trib_option*, size_t,
                          OptionValues*, trib_error*);
  size_t Index(const char* name) const {
    for (size_t i = 0; table_ != nullptr && table_[i].name != nullptr; ++i) {
      if (std::strcmp(table_[i].name, name) == 0) {
        if (table_[i].type == TRIB_OPTION_ALIAS) return Index(table_[i].alias_of);
        return i;
      }
    }
    throw std::logic_error(std::string("the option table has no option '") + name + "'");
  }
  const OptionValue& Get(const char* name) const { return values_[Index(name)]; }
  void Require(size_t i, uint32_t type_a, uint32_t type_b) const {
    if (table_[i].type != type_a && table_[i].type != type_b) {
      throw std::logic_error(std::string("option '") + table_[i].name + "' is a " + OptionTypeName(table_[i].type));
    }
    if (!values_[i].has_value) {
      throw std::logic_error(std::string("option '") + table_[i].name + "' has no value (check HasValue first)");
    }
  }
  const trib_option_spec* table_ = nullptr;
  std::vector<OptionValue> values_;
  std::vector<long> positions_;
};

namespace internal {

inline int OptionFail(trib_error* err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline int OptionFail(trib_error* err, const char* fmt, ...) {
  if (err) {
    err->code = TRIB_ERR_INVALID_ARGUMENT;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
  }
  return TRIB_ERR_INVALID_ARGUMENT;
}

/// Parses `text` as a value of `spec` into `out`; false if it is not one.
inline bool ParseOptionValue(const trib_option_spec& spec, const char* text, OptionValue* out) {
  const std::string t = text ? text : "";
  out->text = t;
  out->has_value = true;
  const std::vector<std::string> words = SplitOptionWords(spec.choices);
  switch (spec.type) {
    case TRIB_OPTION_NUMBER:
    case TRIB_OPTION_INTEGER: {
      for (const std::string& w : words) {
        if (t == w) {
          out->number = std::numeric_limits<double>::quiet_NaN();
          return true;
        }
      }
      if (t.empty()) return false;
      char* end = nullptr;
      const double v = std::strtod(t.c_str(), &end);
      if (end == t.c_str() || *end != '\0' || !std::isfinite(v)) return false;
      const bool min_ex = (spec.flags & TRIB_OPTION_MIN_EXCLUSIVE) != 0;
      const bool max_ex = (spec.flags & TRIB_OPTION_MAX_EXCLUSIVE) != 0;
      if (min_ex ? !(v > spec.min) : !(v >= spec.min)) return false;
      if (max_ex ? !(v < spec.max) : !(v <= spec.max)) return false;
      if (spec.type == TRIB_OPTION_INTEGER) {
        if (v != std::floor(v) || std::fabs(v) > 9007199254740992.0) return false;  // 2^53: exact
        out->integer = static_cast<int64_t>(v);
      }
      out->number = v;
      return true;
    }
    case TRIB_OPTION_BOOLEAN:
      if (t == "1" || t == "true") {
        out->flag = true;
        return true;
      }
      if (t == "0" || t == "false") {
        out->flag = false;
        return true;
      }
      return false;
    case TRIB_OPTION_CHOICE:
      for (const std::string& w : words) {
        if (t == w) return true;
      }
      return false;
    case TRIB_OPTION_STRING:
      return true;
    default:
      return false;
  }
}

}  // namespace internal

/// Reads `opts` (what create() received) against `table` (ending with an
/// empty entry) into `*out`: every option of the table gets the value given
/// (the last one, when given twice) or its default. `kind` and `name` (the
/// plugin's) go into the messages. Returns TRIB_OK, or
/// TRIB_ERR_INVALID_ARGUMENT with the message in `err` for an unknown key or a
/// bad value, or TRIB_ERR_INTERNAL when a default of the table does not parse
/// (a bug in the plugin). Does not throw except std::bad_alloc.
inline int ParseOptions(const trib_option_spec* table, trib_plugin_kind kind, const char* name, const trib_option* opts,
                        size_t num_opts, OptionValues* out, trib_error* err) {
  const char* kind_name = kind == TRIB_KIND_LOSS ? "loss" : "family";
  out->table_ = table;
  size_t n = 0;
  while (table[n].name != nullptr) ++n;
  out->values_.assign(n, OptionValue{});
  out->positions_.assign(n, -1);
  auto canonical = [&](size_t i) {
    if (table[i].type != TRIB_OPTION_ALIAS || table[i].alias_of == nullptr) return i;
    for (size_t j = 0; j < n; ++j) {
      if (table[j].type != TRIB_OPTION_ALIAS && std::strcmp(table[j].name, table[i].alias_of) == 0) return j;
    }
    return i;
  };
  // Defaults first.
  for (size_t i = 0; i < n; ++i) {
    const trib_option_spec& s = table[i];
    if (s.type == TRIB_OPTION_ALIAS || s.default_value == nullptr || (s.flags & TRIB_OPTION_DERIVED_DEFAULT)) continue;
    if (!internal::ParseOptionValue(s, s.default_value, &out->values_[i])) {
      if (err) {
        err->code = TRIB_ERR_INTERNAL;
        std::snprintf(err->message, sizeof(err->message),
                      "option table of %s %s: the default '%s' of option %s is not %s", kind_name, name,
                      s.default_value, s.name,
                      DescribeOptionExpected(s.type, s.flags, s.min, s.max, s.choices).c_str());
      }
      return TRIB_ERR_INTERNAL;
    }
  }
  for (size_t k = 0; k < num_opts; ++k) {
    const char* key = opts[k].key ? opts[k].key : "";
    const char* value = opts[k].value ? opts[k].value : "";
    size_t i = 0;
    while (i < n && std::strcmp(table[i].name, key) != 0) ++i;
    if (i == n) {
      std::string known;
      for (size_t j = 0; j < n; ++j) known += (j ? ", " : "") + std::string(table[j].name);
      return internal::OptionFail(err, "unknown option '%s' for %s %s (known: %s)", key, kind_name, name,
                                  known.empty() ? "none" : known.c_str());
    }
    const size_t c = canonical(i);
    const trib_option_spec& s = table[c];
    OptionValue v;
    if (!internal::ParseOptionValue(s, value, &v)) {
      return internal::OptionFail(err, "option %s='%s': expected %s", key, value,
                                  DescribeOptionExpected(s.type, s.flags, s.min, s.max, s.choices).c_str());
    }
    v.given = true;
    out->values_[c] = v;
    out->positions_[c] = static_cast<long>(k);
  }
  return TRIB_OK;
}

}  // namespace tributary::sdk

/// Exports `table` (a constexpr array of trib_option_spec ending with {}) as the
/// plugin's optional tributary_plugin_options (ABI 1.3), so that the host can
/// show it; a malformed table fails to compile (ValidOptionTable). Use once per
/// plugin, at namespace scope.
#define TRIBUTARY_DEFINE_PLUGIN_OPTIONS(table)                                                \
  static_assert(::tributary::sdk::ValidOptionTable(table), "malformed option table " #table); \
  extern "C" TRIB_PLUGIN_EXPORT const trib_option_table tributary_plugin_options = {          \
      static_cast<uint32_t>(sizeof(trib_option_table)), static_cast<uint32_t>(sizeof(trib_option_spec)), table}

#endif  // TRIBUTARY_PLUGIN_OPTIONS_H_
