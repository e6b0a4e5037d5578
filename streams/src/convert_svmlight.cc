// The svmlight converter ("label idx:value ... [# comment]" lines;
// tributary/convert.h): bags of words (features=counts) or dense REAL
// features (features=reals), in two passes.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "convert_internal.h"

namespace tributary::convert_internal {
namespace {

// Parses a whole string as a double; a leading '+' is allowed. nullopt when it
// is not a number (out-of-range values are not numbers either).
std::optional<double> ParseDouble(std::string_view s) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '+' && s[1] != '-') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Parses a whole string of decimal digits.
std::optional<uint64_t> ParseUnsigned(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string FormatDouble(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// svmlight labels: numbers in canonical form ("+1", "1", "1.0" -> "1",
// "-1.0" -> "-1", "0.50" -> "0.5"); anything else as is (made valid UTF-8).
std::string CanonicalLabel(std::string_view s) {
  const std::optional<double> v = ParseDouble(s);
  if (!v || !std::isfinite(*v)) return ToValidUtf8(s);
  double x = *v;
  if (x == 0) x = 0;  // -0 -> 0
  if (x == std::trunc(x) && std::fabs(x) < 9007199254740992.0) {
    return std::to_string(static_cast<int64_t>(x));
  }
  return FormatDouble(x);
}

struct SvmLine {
  std::string label;
  std::vector<std::pair<uint32_t, double>> features;  // (1-based index, value), increasing indices
};

// Parses one line. *blank for empty and comment-only lines. Errors are
// InvalidDocument statuses naming the file and line. `dim` > 0 bounds the
// indices (reals).
Status ParseSvmLine(std::string_view line, bool reals, uint32_t dim, const LineSource& src, SvmLine* out, bool* blank) {
  out->label.clear();
  out->features.clear();
  const size_t hash = line.find('#');
  if (hash != std::string_view::npos) line = line.substr(0, hash);
  line = Trim(line);
  *blank = line.empty();
  if (*blank) return Status::OK();

  bool first = true;
  uint64_t last_index = 0;
  while (!line.empty()) {
    size_t end = 0;
    while (end < line.size() && !IsSpace(line[end])) ++end;
    const std::string_view tok = line.substr(0, end);
    line = Trim(line.substr(end));
    const size_t colon = tok.find(':');
    if (first) {
      first = false;
      if (colon != std::string_view::npos) {
        return LineError(src, "expected a label before the features, found " + Quote(tok));
      }
      out->label = CanonicalLabel(tok);
      continue;
    }
    if (colon == std::string_view::npos) {
      return LineError(src, "expected idx:value, found " + Quote(tok));
    }
    const std::string_view key = tok.substr(0, colon), value = tok.substr(colon + 1);
    if (key == "qid") {
      if (!ParseUnsigned(value)) return LineError(src, "expected qid:N with an integer N, found " + Quote(tok));
      continue;
    }
    const std::optional<uint64_t> index = ParseUnsigned(key);
    if (!index) {
      return LineError(src, "expected idx:value with a positive integer index, found " + Quote(tok));
    }
    if (*index == 0) {
      return LineError(src, "feature index 0 in " + Quote(tok) + ": expected indices starting at 1 (1-based)");
    }
    if (*index > std::numeric_limits<uint32_t>::max()) {
      return LineError(src, "feature index " + std::to_string(*index) + " in " + Quote(tok) +
                                " is too large (expected at most 4294967295)");
    }
    if (*index <= last_index) {
      return LineError(src, "expected increasing feature indices, found index " + std::to_string(*index) +
                                " after index " + std::to_string(last_index));
    }
    last_index = *index;
    const std::optional<double> v = ParseDouble(value);
    if (!v) {
      return LineError(
          src, "expected a number as the value of feature index " + std::to_string(*index) + ", found " + Quote(value));
    }
    if (reals) {
      if (!std::isfinite(*v)) {
        return LineError(src, "feature index " + std::to_string(*index) + " has the value " + Quote(value) +
                                  ", expected a finite number");
      }
      if (dim > 0 && *index > dim) {
        return LineError(src, "feature index " + std::to_string(*index) + " is beyond the declared dim " +
                                  std::to_string(dim) + " (expected indices 1.." + std::to_string(dim) + ")");
      }
    } else if (!std::isfinite(*v) || *v < 0) {
      return LineError(src, "feature index " + std::to_string(*index) + " has the value " + Quote(value) +
                                ", expected a finite count >= 0");
    }
    out->features.emplace_back(static_cast<uint32_t>(*index), *v);
  }
  return Status::OK();
}

// Calls fn(line) for every document line. Malformed lines fail, or are skipped
// and counted in *skipped under skip_bad; bags of words without a value > 0
// (counts) are dropped and counted in *empty (counters may be null).
template <typename Fn>
Status ForEachSvmLine(const ConvertOptions& opt, bool reals, LineSource* src, uint64_t* skipped, uint64_t* empty,
                      Fn&& fn) {
  TRIB_RETURN_IF_ERROR(src->Rewind());
  SvmLine parsed;
  for (;;) {
    std::string_view line;
    bool eof = false;
    TRIB_RETURN_IF_ERROR(src->Next(&line, &eof));
    if (eof) return Status::OK();
    bool blank = false;
    Status st = ParseSvmLine(line, reals, opt.dim, *src, &parsed, &blank);
    if (!st.ok()) {
      if (!opt.skip_bad) return st;
      if (skipped != nullptr) ++*skipped;
      continue;
    }
    if (blank) continue;
    if (!reals && std::none_of(parsed.features.begin(), parsed.features.end(),
                               [](const std::pair<uint32_t, double>& f) { return f.second > 0; })) {
      if (empty != nullptr) ++*empty;
      continue;
    }
    TRIB_RETURN_IF_ERROR(fn(parsed));
  }
}

// Largest dense document a reader accepts with the default frame limit
// (8 bytes per packed double, with room for the other fields).
constexpr uint64_t kMaxDenseReals = (kDefaultMaxFrameBytes - 4096) / 8;

}  // namespace

Status ConvertSvmlight(const ConvertOptions& opt, LineSource* src, ConvertReport* report) {
  const bool reals = opt.features == "reals";
  // Pass 1: validate, collect the indices and the classes.
  std::unordered_set<uint32_t> index_set;
  uint32_t max_index = 0;
  std::unordered_set<std::string> class_set;
  uint64_t docs = 0, skipped = 0, empty = 0;
  TRIB_RETURN_IF_ERROR(ForEachSvmLine(opt, reals, src, &skipped, &empty, [&](const SvmLine& line) -> Status {
    ++docs;
    class_set.insert(line.label);
    for (const auto& [index, value] : line.features) {
      if (reals) {
        max_index = std::max(max_index, index);
      } else {
        index_set.insert(index);
      }
    }
    return Status::OK();
  }));
  std::vector<std::string> classes(class_set.begin(), class_set.end());
  std::sort(classes.begin(), classes.end());
  std::vector<uint32_t> indices(index_set.begin(), index_set.end());
  std::sort(indices.begin(), indices.end());
  const uint32_t dim = opt.dim > 0 ? opt.dim : max_index;
  if (reals && dim == 0 && docs > 0) {
    return Status::InvalidArgument("'" + src->name() + "': no feature index in " + std::to_string(docs) +
                                   " documents, so the number of real features is unknown (expected idx:value "
                                   "pairs, or give dim)");
  }
  if (reals && dim > kMaxDenseReals) {
    return Status::InvalidArgument("'" + src->name() + "': dense documents of " + std::to_string(dim) +
                                   " real features would exceed the stream frame limit (at most " +
                                   std::to_string(kMaxDenseReals) +
                                   "); convert sparse data with features=counts instead");
  }

  v1::StreamHeader header = NewStreamHeader(opt.frame_checksum);
  v1::Schema* schema = header.mutable_schema();
  if (reals) {
    for (uint32_t i = 1; i <= dim; ++i) {
      v1::FeatureSpec* f = schema->add_features();
      f->set_name("x" + std::to_string(i));
      f->set_kind(v1::FeatureSpec::REAL);
    }
  } else {
    for (uint32_t index : indices) schema->add_vocabulary(std::to_string(index));
  }
  for (const std::string& c : classes) schema->add_class_names(c);
  schema->set_open_classes(opt.open_classes);
  header.set_document_count(docs);
  header.set_source(ToValidUtf8(src->name()));

  // Pass 2: write.
  uint64_t written = 0;
  TRIB_RETURN_IF_ERROR(WriteStream(opt.out, header, [&](DocumentWriter* writer) -> Status {
    v1::Document doc;
    TRIB_RETURN_IF_ERROR(ForEachSvmLine(opt, reals, src, nullptr, nullptr, [&](const SvmLine& line) -> Status {
      doc.Clear();
      doc.set_id(std::to_string(src->line()));
      doc.set_label(line.label);
      if (reals) {
        doc.mutable_reals()->Resize(static_cast<int>(dim), 0.0);
        for (const auto& [index, value] : line.features) {
          if (index > dim) return CountMismatch(*src, docs, written);
          doc.set_reals(static_cast<int>(index - 1), value);
        }
      } else {
        for (const auto& [index, value] : line.features) {
          if (value == 0) continue;
          const auto it = std::lower_bound(indices.begin(), indices.end(), index);
          if (it == indices.end() || *it != index) return CountMismatch(*src, docs, written);
          doc.add_term_ids(static_cast<uint32_t>(it - indices.begin()));
          doc.add_term_counts(value);
        }
      }
      ++written;
      return writer->Write(doc);
    }));
    if (written != docs) return CountMismatch(*src, docs, written);
    return Status::OK();
  }));

  report->documents = written;
  report->skipped = skipped;
  report->empty = empty;
  report->unlabelled = 0;
  report->terms = reals ? dim : indices.size();
  report->classes = classes.size();
  return Status::OK();
}

}  // namespace tributary::convert_internal
