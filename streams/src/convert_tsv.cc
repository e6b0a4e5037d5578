// The tsv converter ("label<TAB>text" lines; tributary/convert.h): in two
// passes with a vocabulary or hashed term ids, or in one pass for a live
// input or an open vocabulary.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "convert_internal.h"
#include "tributary/schema.h"
#include "tributary/tokenizer.h"

namespace tributary::convert_internal {
namespace {

// Distinct tokens a live conversion counts for its report (a bound on the
// memory of a stream that never ends; the count stops there).
constexpr size_t kMaxCountedTerms = size_t{1} << 20;

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

}  // namespace

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

}  // namespace tributary::convert_internal
