// A document source over one stream file, decoded into a model's id space
// (train, prequential, eval, predict / infer).
#ifndef TRIBUTARY_STREAMS_CLI_DECODED_STREAM_H_
#define TRIBUTARY_STREAMS_CLI_DECODED_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "cli_common.h"
#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/predictor.h"
#include "tributary/stream_io.h"

namespace tributary::cli {

// A document source over one stream file that decodes into the model's id
// space, handling bad documents per --skip-bad and new classes.
class DecodedStream {
 public:
  static Result<std::unique_ptr<DecodedStream>> Open(const std::string& path, uint32_t max_frame, const Model& model);
  // Over a reader that has read the header and nothing else (standard input
  // cannot be opened twice: the reader that read the header must be reused).
  static Result<std::unique_ptr<DecodedStream>> Open(std::unique_ptr<DocumentReader> r, const Model& model);
  // The first pass reuses `first` (the reader that read the header; needed
  // for standard input), later passes reopen the file.
  static Result<std::unique_ptr<DecodedStream>> OpenPass(std::unique_ptr<DocumentReader>* first,
                                                         const std::string& path, uint32_t max_frame,
                                                         const Model& model);

  // Next decoded document. *eof at the end. Bad documents are skipped and
  // recorded when skip_bad, else returned as errors. New classes are added to
  // `model` when `learning` (open-classes schemas only); *grew is set then.
  Status Next(Model* model, bool learning, bool skip_bad, BadInput* bad, DocumentBuffer* out, bool* eof, bool* grew);

  // Passes over the next document without reading it (a document another
  // MPI rank learns; DocumentReader::Skip). Damage that loses the framing
  // is an error.
  Status Skip(bool* eof);
  // The index of the next document in the stream.
  uint64_t next_index() const { return reader_->documents_read(); }

  const DocumentReader& reader() const { return *reader_; }
  const DecodeCounters& counters() const { return counters_; }

 private:
  DecodedStream(std::unique_ptr<DocumentReader> r, DocumentDecoder d) : reader_(std::move(r)), decoder_(std::move(d)) {}
  std::unique_ptr<DocumentReader> reader_;
  DocumentDecoder decoder_;
  v1::Document proto_;
  DecodeCounters counters_;
};

// What eval, predict and infer start from: a saved model, its documents
// decoded from `in`, and a Predictor of the model (frozen scoring once the
// stream is long enough to pay for it). Errors name the file they concern.
// `predictor` borrows `model`: declared after it, destroyed before it.
struct ScoringInput {
  std::unique_ptr<Model> model;
  std::unique_ptr<DecodedStream> stream;
  std::unique_ptr<Predictor> predictor;
};
Result<ScoringInput> OpenForScoring(const std::string& model_path, const std::string& in, uint32_t max_frame);

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_DECODED_STREAM_H_
