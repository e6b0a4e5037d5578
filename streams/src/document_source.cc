#include "tributary/document_source.h"

#include <utility>

#include "tributary/learner.h"

namespace tributary {

void SkippedDocuments::Record(const Status& st) {
  ++skipped;
  if (first_messages.size() < kKeptMessages) first_messages.push_back(st.message());
}

DocumentSource::DocumentSource(std::unique_ptr<DocumentReader> r, DocumentDecoder d)
    : reader_(std::move(r)), decoder_(std::move(d)) {}

Result<std::unique_ptr<DocumentSource>> DocumentSource::Open(const std::string& path, uint32_t max_frame,
                                                             const Model& model) {
  auto r = DocumentReader::Open(path, max_frame);
  if (!r.ok()) return r.status();
  return Open(std::move(r).value(), model);
}

Result<std::unique_ptr<DocumentSource>> DocumentSource::Open(std::unique_ptr<DocumentReader> reader,
                                                             const Model& model) {
  auto d = DocumentDecoder::Create(model.schema(), reader->fields().schema(), reader->vocabulary());
  if (!d.ok()) return d.status().WithContext("stream '" + reader->path() + "'");
  return std::unique_ptr<DocumentSource>(new DocumentSource(std::move(reader), std::move(d).value()));
}

Result<std::unique_ptr<DocumentSource>> DocumentSource::OpenPass(std::unique_ptr<DocumentReader>* first,
                                                                 const std::string& path, uint32_t max_frame,
                                                                 const Model& model) {
  if (*first) return Open(std::move(*first), model);
  return Open(path, max_frame, model);
}

Status DocumentSource::Next(Model* model, bool learning, SkippedDocuments* skip, DocumentBuffer* out, bool* eof,
                            bool* grew) {
  *grew = false;
  for (;;) {
    Status st = reader_->Next(&proto_, eof);
    if (!st.ok()) {
      if (skip != nullptr && reader_->last_error_recoverable()) {
        skip->Record(st.WithFile(reader_->path()));
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
      st = st.WithFile(reader_->path());
      if (skip != nullptr && st.IsInvalidDocument()) {
        skip->Record(st);
        continue;
      }
      return st;
    }
    return Status::OK();
  }
}

}  // namespace tributary
