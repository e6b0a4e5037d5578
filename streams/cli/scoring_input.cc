#include "scoring_input.h"

#include <filesystem>
#include <system_error>

namespace tributary::cli {

Result<ScoringInput> OpenForScoring(const std::string& model_path, const std::string& in, uint32_t max_frame) {
  ScoringInput si;
  auto mr = Model::Load(model_path, Registry());
  if (!mr.ok()) return NameFile(mr.status(), model_path);
  si.model = std::move(mr).value();
  auto ds = DocumentSource::Open(in, max_frame, *si.model);
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
