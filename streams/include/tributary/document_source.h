// A document source over one stream file, decoded into a model's id space:
// what `train`, `prequential`, `eval`, `predict` and Python's `learn_file`
// read documents through (one rule for damaged frames, bad documents and new
// classes and terms).
//
// Thread safety: one thread at a time per DocumentSource.
#ifndef TRIBUTARY_DOCUMENT_SOURCE_H_
#define TRIBUTARY_DOCUMENT_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/status.h"
#include "tributary/stream_io.h"

namespace tributary {

/// The documents a run left out as bad (`--skip-bad`, `skip_bad=True`): how
/// many, and the first messages (each names its document).
struct SkippedDocuments {
  static constexpr size_t kKeptMessages = 5;  ///< messages kept (the first ones)
  uint64_t skipped = 0;                       ///< documents and frames left out
  std::vector<std::string> first_messages;    ///< at most kKeptMessages
  /// Counts `st` (a refused document or a damaged frame).
  void Record(const Status& st);
};

/// The documents of one stream file, decoded into a model's id space.
class DocumentSource {
 public:
  /// Opens `path` ("-": standard input) and reads its header. Errors: the
  /// reader's (NotFound, Corruption naming the file); a stream whose schema
  /// does not fit `model`'s (DocumentDecoder::Create, naming the stream).
  static Result<std::unique_ptr<DocumentSource>> Open(const std::string& path, uint32_t max_frame, const Model& model);
  /// Over a reader that has read the header and nothing else (standard input
  /// cannot be opened twice: the reader that read the header is reused).
  static Result<std::unique_ptr<DocumentSource>> Open(std::unique_ptr<DocumentReader> reader, const Model& model);
  /// A pass over `path`: the first reuses `*first` (the reader that read the
  /// header; needed for standard input) and empties it, later ones reopen
  /// the file.
  static Result<std::unique_ptr<DocumentSource>> OpenPass(std::unique_ptr<DocumentReader>* first,
                                                          const std::string& path, uint32_t max_frame,
                                                          const Model& model);

  /// The next document, decoded into *out; *eof at the end of the stream.
  /// When `learning`, new classes and terms (open schemas) are added to
  /// `model` and *grew is set; otherwise only a latent family's unknown
  /// labels (they name documents for evaluation) are. When `skip` is given, a
  /// damaged frame that keeps the framing and a document the decoder refuses
  /// are recorded there and passed over; otherwise they are returned. Either
  /// way the message names the document and the file (InvalidDocument or
  /// Corruption).
  Status Next(Model* model, bool learning, SkippedDocuments* skip, DocumentBuffer* out, bool* eof, bool* grew);

  /// Passes over the next document without reading it (a document another
  /// MPI rank learns; DocumentReader::Skip). Damage that loses the framing
  /// is an error.
  Status Skip(bool* eof) { return reader_->Skip(eof); }
  /// The index of the next document in the stream.
  uint64_t next_index() const { return reader_->documents_read(); }
  const DocumentReader& reader() const { return *reader_; }     ///< the stream's reader (its header, its errors)
  const DecodeCounters& counters() const { return counters_; }  ///< what decoding counted (unseen terms, ...)

 private:
  DocumentSource(std::unique_ptr<DocumentReader> r, DocumentDecoder d);
  std::unique_ptr<DocumentReader> reader_;
  DocumentDecoder decoder_;
  v1::Document proto_;
  DecodeCounters counters_;
};

}  // namespace tributary

#endif  // TRIBUTARY_DOCUMENT_SOURCE_H_
