#include "tributary/convert.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "tributary/schema.h"
#include "tributary/stream_io.h"
#include "tributary/tokenizer.h"
#include "tributary/utf8.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

namespace {

// Distinct tokens a live conversion counts for its report (a bound on the
// memory of a stream that never ends; the count stops there).
constexpr size_t kMaxCountedTerms = size_t{1} << 20;

// ---- UTF-8 -----------------------------------------------------------------

// Length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80), or 0.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1Fu, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, cp = c & 0x0Fu, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07u, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// `s` with every byte that is not part of a valid UTF-8 sequence replaced by
// U+FFFD: protobuf string fields must hold valid UTF-8.
std::string ToValidUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out += s[i++];
      continue;
    }
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

// The longest line a text input may have (tsv, svmlight).
constexpr size_t kMaxLineBytes = size_t{64} << 20;

// ---- Small string helpers --------------------------------------------------

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// 's' quoted for an error message, shortened when long: the input's bytes
// made printable (utf8.h Printable: a control such as ESC or an invalid byte
// is shown as \xNN; an error message must not drive the user's terminal).
std::string Quote(std::string_view s) { return "'" + Printable(s, 60) + "'"; }

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
// "-1.0" -> "-1", "0.50" -> "0.5"); anything else as is.
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

// ---- Input lines -----------------------------------------------------------

// Lines of a file, readable more than once. Standard input is buffered in
// memory so that it can be read twice too.
class LineSource {
 public:
  // `live`: a pipe, terminal, FIFO or socket is read once, line by line as
  // it arrives (live() is then true); otherwise standard input is buffered.
  static Result<std::unique_ptr<LineSource>> Open(const std::string& path, bool live) {
    std::unique_ptr<LineSource> src(new LineSource());
    if (path == "-" && live && !IsRegularFile(0)) {
      src->name_ = "<stdin>";
      src->fp_ = stdin;
      src->owns_fp_ = false;
      src->live_ = true;
      return src;
    }
    if (path == "-") {
      src->name_ = "<stdin>";
      src->memory_ = true;
      char buf[1 << 16];
      size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) src->data_.append(buf, n);
      if (std::ferror(stdin)) return Status::IOError(std::string("reading <stdin>: ") + std::strerror(errno));
      return src;
    }
    src->name_ = path;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      const int e = errno;
      if (e == ENOENT || e == ENOTDIR) {
        return Status::NotFound("input file '" + path + "' not found: " + std::strerror(e));
      }
      return Status::IOError("cannot open input file '" + path + "': " + std::strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument("input '" + path + "' is a directory, expected a file");
    }
    src->live_ = live && !S_ISREG(st.st_mode);
    src->fp_ = std::fopen(path.c_str(), "rb");
    if (src->fp_ == nullptr) {
      const int e = errno;
      if (e == ENOENT) return Status::NotFound("input file '" + path + "' not found: " + std::strerror(e));
      return Status::IOError("cannot open input file '" + path + "': " + std::strerror(e));
    }
    return src;
  }

  ~LineSource() {
    if (fp_ != nullptr && owns_fp_) std::fclose(fp_);
  }
  LineSource(const LineSource&) = delete;
  LineSource& operator=(const LineSource&) = delete;

  const std::string& name() const { return name_; }
  // Read once, as it arrives (no second pass: Rewind fails).
  bool live() const { return live_; }
  // 1-based number of the line last returned.
  uint64_t line() const { return line_; }

  Status Rewind() {
    if (live_) {
      if (line_ == 0) return Status::OK();
      return Status::Internal("'" + name_ + "' is read as it arrives and cannot be read twice");
    }
    line_ = 0;
    pos_ = 0;
    if (fp_ != nullptr) {
      if (std::fseek(fp_, 0, SEEK_SET) != 0) {
        return Status::IOError("cannot rewind '" + name_ + "' for the second pass: " + std::strerror(errno));
      }
      std::clearerr(fp_);
    }
    return Status::OK();
  }

  // The next line without its "\n" or "\r\n"; *eof at the end.
  Status Next(std::string_view* line, bool* eof) {
    *eof = false;
    if (memory_) {
      if (pos_ >= data_.size()) {
        *eof = true;
        return Status::OK();
      }
      const size_t nl = data_.find('\n', pos_);
      const size_t end = nl == std::string::npos ? data_.size() : nl;
      *line = std::string_view(data_).substr(pos_, end - pos_);
      pos_ = nl == std::string::npos ? data_.size() : nl + 1;
    } else {
      // One line, bounded: a file with no newline in sight (/dev/zero, a
      // binary file given by mistake) is refused at kMaxLineBytes instead
      // of being read into memory until it fails.
      errno = 0;
      line_buf_.clear();
      int c = EOF;
      bool any = false;
      while ((c = getc_unlocked(fp_)) != EOF) {
        any = true;
        if (c == '\n') break;
        if (line_buf_.size() >= kMaxLineBytes) {
          return Status::InvalidDocument("'" + name_ + "' line " + std::to_string(line_ + 1) + ": longer than " +
                                         std::to_string(kMaxLineBytes >> 20) +
                                         " MiB without a newline (a binary file or a device?)");
        }
        line_buf_.push_back(static_cast<char>(c));
      }
      if (c == EOF && std::ferror(fp_)) {
        return Status::IOError("reading '" + name_ + "' after line " + std::to_string(line_) + ": " +
                               std::strerror(errno));
      }
      if (!any) {
        *eof = true;
        return Status::OK();
      }
      *line = line_buf_;
    }
    ++line_;
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    return Status::OK();
  }

 private:
  LineSource() = default;
  static bool IsRegularFile(int fd) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  }
  std::string name_;
  bool memory_ = false;
  bool live_ = false;
  bool owns_fp_ = true;
  std::string data_;
  size_t pos_ = 0;
  FILE* fp_ = nullptr;
  std::string line_buf_;  // the line Next returned last (read from fp_)
  uint64_t line_ = 0;
};

Status LineError(const LineSource& src, const std::string& what) {
  return Status::InvalidDocument("'" + src.name() + "' line " + std::to_string(src.line()) + ": " + what);
}

// Writes the header, then the documents produced by `produce`, and closes.
// The output is removed when anything fails.
template <typename Produce>
Status WriteStream(const std::string& out, const v1::StreamHeader& header, Produce&& produce) {
  auto writer = DocumentWriter::Create(out, header);
  if (!writer.ok()) return writer.status();
  Status st = produce(writer->get());
  Status closed = (*writer)->Close();
  if (st.ok()) st = std::move(closed);
  if (!st.ok() && out != "-") std::remove(out.c_str());
  return st;
}

Status CountMismatch(const LineSource& src, uint64_t expected, uint64_t written) {
  return Status::IOError("'" + src.name() + "' changed while it was being converted: the first pass found " +
                         std::to_string(expected) + " documents, the second " + std::to_string(written));
}

// ---- TSV -------------------------------------------------------------------

// Calls fn(label, tokens) for every document line (label trimmed; tokens
// filtered, valid UTF-8 and not empty). Malformed lines fail, or are skipped
// and counted in *skipped under skip_bad; lines without tokens are dropped and
// counted in *empty (counters may be null).
template <typename Fn>
Status ForEachTsvLine(const ConvertOptions& opt, LineSource* src, uint64_t* skipped, uint64_t* empty, Fn&& fn) {
  TRIB_RETURN_IF_ERROR(src->Rewind());
  const auto& stop = EnglishStopWords();
  std::vector<std::string> tokens;
  for (;;) {
    std::string_view line;
    bool eof = false;
    TRIB_RETURN_IF_ERROR(src->Next(&line, &eof));
    if (eof) return Status::OK();
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) {
      if (Trim(line).empty()) continue;  // blank line
      if (opt.skip_bad) {
        if (skipped != nullptr) ++*skipped;
        continue;
      }
      return LineError(*src, "expected label<TAB>text, found no TAB in " + Quote(line));
    }
    const std::string_view label = Trim(line.substr(0, tab));
    tokens.clear();
    Tokenize(line.substr(tab + 1), &tokens);
    size_t kept = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (opt.stop_words && stop.count(tokens[i]) != 0) continue;
      std::string t = ToValidUtf8(tokens[i]);
      tokens[kept++] = std::move(t);
    }
    tokens.resize(kept);
    if (tokens.empty()) {
      if (empty != nullptr) ++*empty;
      continue;
    }
    TRIB_RETURN_IF_ERROR(fn(label, tokens));
  }
}

// One document of term ids with their counts (ids sorted, repeats counted).
void SetTerms(std::vector<uint32_t>* ids, v1::Document* doc) {
  std::sort(ids->begin(), ids->end());
  for (size_t i = 0; i < ids->size();) {
    size_t j = i;
    while (j < ids->size() && (*ids)[j] == (*ids)[i]) ++j;
    doc->add_term_ids((*ids)[i]);
    doc->add_term_counts(static_cast<double>(j - i));
    i = j;
  }
}

// One pass over the input, for a live input (a pipe, terminal or FIFO) or an
// open vocabulary: the header cannot list a vocabulary or classes nobody has
// seen yet, so the classes are open and the terms are either hashed
// (opt.hashed_dim, or kLiveHashedDim) or, with opt.open_vocabulary, named in
// each document (Document.tokens with their counts, in order of first
// occurrence; Schema.open_vocabulary: a model with an open vocabulary adds
// the ones it has not seen, any other maps them through its own). A live
// input's documents are written, and flushed, as soon as their line is
// complete.
Status ConvertTsvOnePass(const ConvertOptions& opt, LineSource* src, ConvertReport* report) {
  const bool open = opt.open_vocabulary;
  const uint64_t dim = open ? 0 : opt.hashed_dim > 0 ? opt.hashed_dim : kLiveHashedDim;
  v1::StreamHeader header = NewStreamHeader(opt.frame_checksum);
  if (open) {
    header.mutable_schema()->set_open_vocabulary(true);
  } else {
    header.mutable_schema()->set_hashed_dim(dim);
  }
  header.mutable_schema()->set_open_classes(true);
  header.set_source(ToValidUtf8(src->name()));
  std::unordered_set<uint64_t> distinct;  // 64-bit hashes of the distinct tokens, for the report
  std::unordered_set<std::string> classes;
  report->hashed_dim = dim;
  const bool live = src->live();
  return WriteStream(opt.out, header, [&](DocumentWriter* writer) -> Status {
    if (live) TRIB_RETURN_IF_ERROR(writer->Flush());  // readers see the header at once
    v1::Document doc;
    std::vector<uint32_t> ids;
    std::unordered_map<std::string, int> slot;  // open: token -> its index in doc.tokens
    return ForEachTsvLine(opt, src, &report->skipped, &report->empty,
                          [&](std::string_view label, const std::vector<std::string>& tokens) -> Status {
                            doc.Clear();
                            doc.set_id(std::to_string(src->line()));
                            if (label.empty()) {
                              ++report->unlabelled;
                            } else {
                              doc.set_label(ToValidUtf8(label));
                              if (classes.insert(doc.label()).second) report->classes = classes.size();
                            }
                            ids.clear();
                            slot.clear();
                            for (const std::string& t : tokens) {
                              if (distinct.size() < kMaxCountedTerms) distinct.insert(HashToken(t, 0));
                              if (!open) {
                                ids.push_back(static_cast<uint32_t>(HashToken(t, dim)));
                                continue;
                              }
                              auto [it, fresh] = slot.emplace(t, doc.tokens_size());
                              if (fresh) {
                                doc.add_tokens(t);
                                doc.add_token_counts(1.0);
                              } else {
                                doc.set_token_counts(it->second, doc.token_counts(it->second) + 1.0);
                              }
                            }
                            report->terms = distinct.size();
                            if (!open) SetTerms(&ids, &doc);
                            TRIB_RETURN_IF_ERROR(writer->Write(doc));
                            ++report->documents;
                            return live ? writer->Flush() : Status::OK();
                          });
  });
}

Status ConvertTsv(const ConvertOptions& opt, LineSource* src, ConvertReport* report) {
  if (opt.open_vocabulary || src->live()) return ConvertTsvOnePass(opt, src, report);
  const bool hashed = opt.hashed_dim > 0;
  // Pass 1: validate, collect the vocabulary and the classes.
  std::unordered_map<std::string, uint32_t> vocab;
  std::vector<std::string> names;
  std::unordered_set<uint64_t> hashed_terms;  // 64-bit hashes of the distinct tokens (hashed mode)
  std::unordered_set<std::string> class_set;
  uint64_t docs = 0, unlabelled = 0, skipped = 0, empty = 0;
  TRIB_RETURN_IF_ERROR(ForEachTsvLine(
      opt, src, &skipped, &empty, [&](std::string_view label, const std::vector<std::string>& tokens) -> Status {
        ++docs;
        if (label.empty()) {
          ++unlabelled;
        } else {
          class_set.insert(ToValidUtf8(label));
        }
        for (const std::string& t : tokens) {
          if (hashed) {
            hashed_terms.insert(HashToken(t, 0));
          } else if (vocab.emplace(t, static_cast<uint32_t>(names.size())).second) {
            if (names.size() == std::numeric_limits<uint32_t>::max()) {
              return LineError(*src, "the vocabulary exceeds 2^32-1 terms; use hashed term ids");
            }
            names.push_back(t);
          }
        }
        return Status::OK();
      }));
  std::vector<std::string> classes(class_set.begin(), class_set.end());
  std::sort(classes.begin(), classes.end());

  v1::StreamHeader header = NewStreamHeader(opt.frame_checksum);
  v1::Schema* schema = header.mutable_schema();
  if (hashed) {
    schema->set_hashed_dim(opt.hashed_dim);
  } else {
    for (const std::string& n : names) schema->add_vocabulary(n);
  }
  for (const std::string& c : classes) schema->add_class_names(c);
  schema->set_open_classes(opt.open_classes);
  header.set_document_count(docs);
  header.set_source(ToValidUtf8(src->name()));

  // Pass 2: write.
  uint64_t written = 0;
  TRIB_RETURN_IF_ERROR(WriteStream(opt.out, header, [&](DocumentWriter* writer) -> Status {
    v1::Document doc;
    std::vector<uint32_t> ids;
    TRIB_RETURN_IF_ERROR(ForEachTsvLine(opt, src, nullptr, nullptr,
                                        [&](std::string_view label, const std::vector<std::string>& tokens) -> Status {
                                          doc.Clear();
                                          doc.set_id(std::to_string(src->line()));
                                          if (!label.empty()) doc.set_label(ToValidUtf8(label));
                                          ids.clear();
                                          for (const std::string& t : tokens) {
                                            if (hashed) {
                                              ids.push_back(static_cast<uint32_t>(HashToken(t, opt.hashed_dim)));
                                            } else {
                                              const auto it = vocab.find(t);
                                              if (it == vocab.end()) return CountMismatch(*src, docs, written);
                                              ids.push_back(it->second);
                                            }
                                          }
                                          SetTerms(&ids, &doc);
                                          ++written;
                                          return writer->Write(doc);
                                        }));
    if (written != docs) return CountMismatch(*src, docs, written);
    return Status::OK();
  }));

  report->documents = written;
  report->skipped = skipped;
  report->empty = empty;
  report->unlabelled = unlabelled;
  report->terms = hashed ? hashed_terms.size() : names.size();
  report->classes = classes.size();
  return Status::OK();
}

// ---- svmlight --------------------------------------------------------------

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

Status CheckOptions(const ConvertOptions& opt) {
  if (opt.format != "tsv" && opt.format != "svmlight") {
    return Status::InvalidArgument("unknown input format '" + opt.format + "' (expected tsv or svmlight)");
  }
  if (opt.in.empty()) return Status::InvalidArgument("no input file given");
  if (opt.out.empty()) return Status::InvalidArgument("no output file given");
  if (opt.format == "tsv") {
    if (opt.features != "counts") {
      return Status::InvalidArgument("features='" + opt.features + "' applies to svmlight input only (tsv is text)");
    }
    if (opt.dim != 0) return Status::InvalidArgument("dim applies to svmlight input with features=reals only");
    if (opt.open_vocabulary && opt.hashed_dim != 0) {
      return Status::InvalidArgument(
          "open_vocabulary and hashed_dim are two ways of reading terms nobody listed in advance; expected one of "
          "them (an open vocabulary names its terms, hashed ids need none)");
    }
    if (opt.hashed_dim > kMaxHashedDim) {
      return Status::InvalidArgument("hashed_dim " + std::to_string(opt.hashed_dim) + " exceeds the maximum " +
                                     std::to_string(kMaxHashedDim) +
                                     " (2^24; a stream with more could not be read: schema.h)");
    }
  } else {
    if (opt.features != "counts" && opt.features != "reals") {
      return Status::InvalidArgument("unknown svmlight features '" + opt.features + "' (expected counts or reals)");
    }
    if (opt.stop_words) return Status::InvalidArgument("stop words apply to tsv (text) input only");
    if (opt.hashed_dim != 0) return Status::InvalidArgument("hashed term ids apply to tsv (text) input only");
    if (opt.open_vocabulary) return Status::InvalidArgument("an open vocabulary applies to tsv (text) input only");
    if (opt.dim != 0 && opt.features != "reals") {
      return Status::InvalidArgument("dim applies to svmlight input with features=reals only");
    }
  }
  if (opt.in != "-" && opt.out != "-") {
    struct stat a {
    }, b{};
    if (::stat(opt.in.c_str(), &a) == 0 && ::stat(opt.out.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
      return Status::InvalidArgument("the output '" + opt.out + "' is the input file '" + opt.in + "'");
    }
  }
  return Status::OK();
}

}  // namespace

Status ConvertFile(const ConvertOptions& options, ConvertReport* report) {
  ConvertReport local;
  if (report == nullptr) report = &local;
  *report = ConvertReport();
  TRIB_RETURN_IF_ERROR(CheckOptions(options));
  // Only tsv is converted live; svmlight needs its whole input (the largest
  // index, the label set) before it writes the header.
  auto src = LineSource::Open(options.in, options.live && options.format == "tsv");
  if (!src.ok()) return src.status();
  if (options.format == "tsv") return ConvertTsv(options, src->get(), report);
  return ConvertSvmlight(options, src->get(), report);
}

}  // namespace tributary
