// The posterior summary of families trained by SEP / EP / ADF, shared by
// `eval` and `inspect`.
#ifndef TRIBUTARY_STREAMS_CLI_POSTERIOR_SUMMARY_H_
#define TRIBUTARY_STREAMS_CLI_POSTERIOR_SUMMARY_H_

#include <nlohmann/json_fwd.hpp>

#include "tributary/model.h"
#include "tributary/status.h"

namespace tributary::cli {

// Adds the family's summary (sep_abi.h `summary`: mixing weights,
// per-component means and variances) to `j`: model-wide vectors as j[name],
// per-component ones as j["components"][k][name]. Nothing for families
// without one.
Status AddPosteriorSummary(const Model& m, nlohmann::json* j);

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_POSTERIOR_SUMMARY_H_
