// Converters from text formats to Tributary document streams.
//
//   tsv       one document per line, "label<TAB>text". An empty label means
//             unlabelled. The text is tokenized with Tokenize(); term ids index
//             the header's vocabulary (terms in order of first appearance) or,
//             with hashed_dim > 0, are HashToken(term, hashed_dim) buckets.
//   svmlight  LIBSVM / LIBLINEAR / scikit-learn lines,
//             "label idx:value idx:value ... [# comment]", optional qid:N
//             (ignored), indices 1-based and strictly increasing. Either a bag
//             of words (features = "counts": index i is the term named "i") or
//             dense REAL features x1..x<dim> (features = "reals").
//
// Both converters read a file twice: the first pass validates every line and
// collects the vocabulary and classes (nothing is written when the input is
// malformed), the second writes the header and the documents.
//
// Live input: tsv from a pipe, a terminal, a FIFO or a socket (standard input
// or a path; ConvertOptions::live, the default) is read once, as it arrives:
// each document is written and flushed as soon as its line is complete, so
// `tail -f log | tributary convert ... | tributary train --in -` learns while
// the log grows. The header is written first, before anyone knows the words or
// the labels, so a live stream has hashed term ids (hashed_dim, default
// kLiveHashedDim) and open classes (labels by name); its document_count is 0
// (unknown). A malformed line fails the conversion after the documents before
// it were written (skip_bad skips it). svmlight and standard input redirected
// from a regular file are buffered and converted in two passes as before. Blank lines (and, for
// svmlight, comment-only lines) are ignored; lines that yield an empty bag of
// words are dropped and counted (ConvertReport::empty), since the model refuses
// empty documents. Document.id is the 1-based line number. Bytes that are not
// valid UTF-8 in terms and labels are replaced by U+FFFD, since protobuf string
// fields must hold valid UTF-8.
#ifndef TRIBUTARY_CONVERT_H_
#define TRIBUTARY_CONVERT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tributary/model_config.h"  // kLiveHashedDim
#include "tributary/status.h"
#include "tributary/tokenizer.h"  // Tokenize, EnglishStopWords (moved to lib)

namespace tributary {

/// What ConvertFile converts and how (the formats are at the top of this file).
struct ConvertOptions {
  std::string format;  ///< "tsv" or "svmlight"
  /// Input path ("-": standard input); required.
  std::string in, out;              ///< output path ("-": standard output); required, not the input file
  bool stop_words = false;          ///< tsv: drop EnglishStopWords()
  uint64_t hashed_dim = 0;          ///< tsv: > 0 -> hashed term ids (no vocabulary in the header), <= 2^24
  std::string features = "counts";  ///< svmlight: "counts" (bag of words: idx -> term named by the idx) or
                                    ///< "reals" (dense REAL features)
  uint32_t dim = 0;                 ///< svmlight reals: number of dense features (0: max index seen in this file)
  bool open_classes = false;        ///< written into the schema
  /// tsv: one pass, no vocabulary in the header (Schema.open_vocabulary):
  /// documents carry their terms as text (Document.tokens) and a model with
  /// an open vocabulary adds the ones it has not seen. Classes are open.
  /// Excludes hashed_dim. Trade-offs in docs/sources.md.
  bool open_vocabulary = false;
  bool skip_bad = false;  ///< skip malformed lines (counted) instead of failing
  bool live = true;       ///< tsv: convert a pipe / terminal / FIFO in one pass, as it arrives
  /// Write a checksummed stream (format_version 2: a CRC per frame, see
  /// stream_io.h), which readers verify: a damaged file is refused instead of
  /// learned. Costs 4 bytes a document; readers older than format 2 refuse
  /// such a stream (false writes format 1, for them).
  bool frame_checksum = true;
};

/// What ConvertFile wrote and left out.
struct ConvertReport {
  uint64_t documents = 0;  ///< documents written
  uint64_t skipped = 0;    ///< malformed lines skipped (skip_bad)
  /// Lines dropped because they had no terms left (tsv: no tokens, or only stop
  /// words; svmlight counts: no value > 0): the model refuses empty documents.
  uint64_t empty = 0;
  uint64_t unlabelled = 0;  ///< documents written without a label
  /// tsv: distinct terms (with hashed_dim: distinct tokens before hashing);
  /// svmlight counts: distinct indices; svmlight reals: dense features (dim).
  uint64_t terms = 0;
  uint64_t classes = 0;  ///< class names in the header (live: distinct labels seen)
  /// Live conversions: the hashed_dim used (0: the input was read twice).
  uint64_t hashed_dim = 0;
};

/// Converts options.in to a document stream at options.out. Errors:
/// InvalidArgument (bad options, input and output the same file), NotFound
/// (missing input), InvalidDocument (a malformed line: the message names the
/// file, the line, what was expected and what was found), IOError.
Status ConvertFile(const ConvertOptions& options, ConvertReport* report);

}  // namespace tributary

#endif  // TRIBUTARY_CONVERT_H_
