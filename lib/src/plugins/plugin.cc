// A loaded plugin as the host describes it (plugin_registry.h): the name of
// its kind, and the options of its option table (ABI 1.3) as the host shows
// and checks them.
#include <cmath>
#include <string>

#include "tributary/plugin_options.h"
#include "tributary/plugin_registry.h"

namespace tributary {

const char* KindName(trib_plugin_kind kind) {
  switch (kind) {
    case TRIB_KIND_FAMILY:
      return "family";
    case TRIB_KIND_LOSS:
      return "loss";
  }
  return "unknown";
}

const char* OptionSpec::type_name() const { return sdk::OptionTypeName(type); }

std::string OptionSpec::range() const {
  std::string words;
  for (const auto& w : choices) words += (words.empty() ? "" : "|") + w;
  switch (type) {
    case TRIB_OPTION_NUMBER:
    case TRIB_OPTION_INTEGER: {
      const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
      std::string r;
      if (has_min && has_max) {
        r = std::string((flags & TRIB_OPTION_MIN_EXCLUSIVE) ? "(" : "[") + sdk::FormatOptionNumber(min) + ", " +
            sdk::FormatOptionNumber(max) + ((flags & TRIB_OPTION_MAX_EXCLUSIVE) ? ")" : "]");
      } else if (has_min) {
        r = std::string((flags & TRIB_OPTION_MIN_EXCLUSIVE) ? "> " : ">= ") + sdk::FormatOptionNumber(min);
      } else if (has_max) {
        r = std::string((flags & TRIB_OPTION_MAX_EXCLUSIVE) ? "< " : "<= ") + sdk::FormatOptionNumber(max);
      }
      if (words.empty()) return r;
      return r.empty() ? words : r + ", or " + words;
    }
    case TRIB_OPTION_BOOLEAN:
      return "0|1";
    case TRIB_OPTION_CHOICE:
      return words;
    case TRIB_OPTION_ALIAS:
      return "alias of " + alias_of;
    default:
      return "";
  }
}

std::string OptionSpec::expected() const {
  std::string words;
  for (const auto& w : choices) words += (words.empty() ? "" : "|") + w;
  return sdk::DescribeOptionExpected(type, flags, min, max, words.empty() ? nullptr : words.c_str());
}

const OptionSpec* Plugin::FindOption(const std::string& option) const {
  for (const auto& o : option_specs) {
    if (o.name != option) continue;
    if (!o.is_alias()) return &o;
    for (const auto& t : option_specs) {
      if (t.name == o.alias_of && !t.is_alias()) return &t;
    }
    return nullptr;
  }
  return nullptr;
}

}  // namespace tributary
