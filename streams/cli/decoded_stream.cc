#include "decoded_stream.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "tributary/learner.h"

namespace tributary::cli {

Result<std::unique_ptr<DecodedStream>> DecodedStream::Open(const std::string& path, uint32_t max_frame,
                                                           const Model& model) {
  auto r = DocumentReader::Open(path, max_frame);
  if (!r.ok()) return r.status();
  return Open(std::move(r).value(), model);
}

Result<std::unique_ptr<DecodedStream>> DecodedStream::Open(std::unique_ptr<DocumentReader> r, const Model& model) {
  auto d = DocumentDecoder::Create(model.schema(), r->fields().schema(), r->vocabulary());
  if (!d.ok()) return d.status().WithContext("stream '" + r->path() + "'");
  std::unique_ptr<DecodedStream> s(new DecodedStream(std::move(r), std::move(d).value()));
  return s;
}

Result<std::unique_ptr<DecodedStream>> DecodedStream::OpenPass(std::unique_ptr<DocumentReader>* first,
                                                               const std::string& path, uint32_t max_frame,
                                                               const Model& model) {
  if (*first) return Open(std::move(*first), model);
  return Open(path, max_frame, model);
}

Status DecodedStream::Next(Model* model, bool learning, bool skip_bad, BadInput* bad, DocumentBuffer* out, bool* eof,
                           bool* grew) {
  *grew = false;
  for (;;) {
    Status st = reader_->Next(&proto_, eof);
    if (!st.ok()) {
      if (skip_bad && reader_->last_error_recoverable()) {
        bad->Record(st);
        continue;
      }
      return st;
    }
    if (*eof) return Status::OK();
    // Learning adds new classes and terms to the model. A latent family's
    // labels only name documents for evaluation: unknown ones are added (to
    // the schema only) at evaluation too.
    const DecodeGrowth growth = learning ? kGrowClassesAndTerms : model->latent_outputs() ? kGrowClasses : kGrowNothing;
    st = DecodeGrowing(decoder_, proto_, reader_->documents_read() - 1, model, growth, out, &counters_, grew);
    if (!st.ok()) {
      if (skip_bad && st.IsInvalidDocument()) {
        bad->Record(st);
        continue;
      }
      return st.WithContext("'" + reader_->path() + "'");
    }
    return Status::OK();
  }
}

Status DecodedStream::Skip(bool* eof) { return reader_->Skip(eof); }

Result<ScoringInput> OpenForScoring(const std::string& model_path, const std::string& in, uint32_t max_frame) {
  ScoringInput si;
  auto mr = Model::Load(model_path, Registry());
  if (!mr.ok()) return NameFile(mr.status(), model_path);
  si.model = std::move(mr).value();
  auto ds = DecodedStream::Open(in, max_frame, *si.model);
  if (!ds.ok()) return NameFile(ds.status(), in);
  si.stream = std::move(ds).value();
  auto predictor = Predictor::Create(si.model.get());
  if (!predictor.ok()) return NameFile(predictor.status(), model_path);
  si.predictor = std::move(predictor).value();
  // A file long enough to pay for the frozen table is scored through it from
  // its first document: the Predictor would otherwise score about as much
  // as the table costs through Model::Score before building it (its rule for
  // a run of unknown length). The file's size bounds the work: a term takes
  // at least 2 bytes in a frame (its id and, packed, part of its count) and
  // costs one operation per output. A failed freeze leaves the Predictor
  // without a table, as its own attempt would.
  std::error_code ec;
  const uint64_t bytes = in == "-" ? 0 : std::filesystem::file_size(in, ec);
  if (!ec && bytes / 2 * si.model->num_outputs() >= 4 * si.model->stats().size()) (void)si.predictor->Freeze();
  return si;
}

}  // namespace tributary::cli
