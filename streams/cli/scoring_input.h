// What eval, predict and infer start from (documents: the library's
// DocumentSource, tributary/document_source.h).
#ifndef TRIBUTARY_STREAMS_CLI_SCORING_INPUT_H_
#define TRIBUTARY_STREAMS_CLI_SCORING_INPUT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "cli_common.h"
#include "tributary/document.h"
#include "tributary/document_source.h"
#include "tributary/model.h"
#include "tributary/predictor.h"
#include "tributary/stream_io.h"

namespace tributary::cli {

// What eval, predict and infer start from: a saved model, its documents
// decoded from `in`, and a Predictor of the model (frozen scoring once the
// stream is long enough to pay for it). Errors name the file they concern.
// `predictor` borrows `model`: declared after it, destroyed before it.
struct ScoringInput {
  std::unique_ptr<Model> model;
  std::unique_ptr<DocumentSource> stream;
  std::unique_ptr<Predictor> predictor;
};
Result<ScoringInput> OpenForScoring(const std::string& model_path, const std::string& in, uint32_t max_frame);

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_SCORING_INPUT_H_
