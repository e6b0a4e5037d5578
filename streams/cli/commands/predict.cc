// `tributary predict` (classes and probabilities) and `tributary infer`
// (topic / component proportions) per document.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands/commands.h"
#include "scoring_input.h"
#include "tributary/metrics.h"
#include "tributary/stream_io.h"

namespace tributary::cli {
namespace {

using json = nlohmann::json;

struct PredictFlags {
  std::string model, in, format = "jsonl", out;
  bool skip_bad = false;
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
};

// `predict` (classes and probabilities) and `infer` (topic / component
// proportions: softmax of a latent family's scores, see plugin_abi.h).
int RunPredict(const std::string& model_path, const std::string& in, const std::string& format, const std::string& out,
               bool skip_bad, uint32_t max_frame, bool infer) {
  if (format != "jsonl" && format != "pb") {
    return ReportError(Status::InvalidArgument("--format '" + format + "': expected jsonl or pb"));
  }
  auto input = OpenForScoring(model_path, in, max_frame);
  if (!input.ok()) return ReportError(input.status());
  auto& [model, ds, predictor] = *input;
  // infer on a classifier with latent components (ABI 1.8: slda's topics):
  // its proportions, not its classes.
  const bool by_proportions = infer && !model->latent_outputs();
  if (infer && model->num_components() == 0) {
    return ReportError(Status::InvalidArgument("infer: '" + model_path + "': family '" + model->family().name +
                                               "' has no latent components or topics (its outputs are the classes); "
                                               "use predict"));
  }
  const uint32_t K = by_proportions ? model->num_components() : model->num_outputs();
  std::vector<std::string> classes(K);
  for (uint32_t k = 0; k < K; ++k) classes[k] = by_proportions ? std::to_string(k) : model->OutputName(k);
  std::vector<double> scores(K), probs(K);
  std::unique_ptr<DocumentWriter> writer;
  std::ostream* text = &std::cout;
  std::unique_ptr<std::ofstream> file;
  if (format == "pb") {
    auto w = DocumentWriter::CreateRaw(out.empty() ? "-" : out);
    if (!w.ok()) return ReportError(w.status());
    writer = std::move(w).value();
    v1::PredictionHeader h;
    h.set_magic("tributary.predictions");
    for (const auto& c : classes) h.add_class_names(c);
    Status st = writer->Write(h);
    if (!st.ok()) return ReportError(st);
  } else if (!out.empty() && out != "-") {
    file = std::make_unique<std::ofstream>(out);
    if (!*file) return ReportError(Status::IOError("cannot create '" + out + "'"));
    text = file.get();
  }
  BadInput bad;
  DocumentBuffer doc;
  v1::Prediction pred;
  for (;;) {
    bool eof = false, grew = false;
    Status st = ds->Next(model.get(), false, skip_bad ? &bad : nullptr, &doc, &eof, &grew);
    if (!st.ok()) return ReportError(NameFile(st, in));
    if (eof) break;
    if (by_proportions) {
      st = model->Proportions(doc.View(), predictor->state(), probs.data());
    } else {
      st = predictor->Score(doc.View(), scores.data());
      if (st.ok()) Posterior(scores.data(), K, probs.data());
    }
    if (!st.ok()) return ReportError(NameFile(st.WithContext(doc.Name()), in));
    uint32_t best = static_cast<uint32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
    if (writer) {
      pred.Clear();
      pred.set_id(doc.id);
      pred.set_index(doc.index);
      pred.set_predicted(classes[best]);
      for (double p : probs) pred.add_probabilities(p);
      st = writer->Write(pred);
      if (!st.ok()) return ReportError(st);
    } else {
      json j;
      j["id"] = doc.id;
      j["index"] = doc.index;
      if (infer) {
        j["dominant"] = best;
        j["proportions"] = probs;
      } else {
        j["predicted"] = classes[best];
        json p = json::object();
        for (uint32_t k = 0; k < K; ++k) p[classes[k]] = probs[k];
        j["probabilities"] = p;
      }
      *text << j.dump() << '\n';
      // A write that failed (a full disk) stops here: never a cut file and
      // exit 0.
      if (!*text) break;
    }
  }
  PrintBad(bad);
  if (writer) {
    Status st = writer->Close();
    if (!st.ok()) return ReportError(st);
  }
  text->flush();
  if (file != nullptr) file->close();
  if (!*text) {
    const int e = errno;
    return ReportError(Status::IOError(std::string(infer ? "infer" : "predict") + ": writing '" +
                                       (file != nullptr ? out : std::string("standard output")) + "' failed" +
                                       (e != 0 ? std::string(": ") + std::strerror(e) : std::string())));
  }
  return kExitOk;
}

// The options of `predict` and `infer`.
std::shared_ptr<PredictFlags> AddPredictOptions(CLI::App* cmd) {
  auto f = std::make_shared<PredictFlags>();
  cmd->add_option("--model", f->model, "model snapshot")->required();
  cmd->add_option("--in", f->in, "document stream")->required();
  cmd->add_option("--format", f->format, "jsonl or pb")->capture_default_str();
  cmd->add_option("--out", f->out, "output file (default stdout)");
  cmd->add_flag("--skip-bad", f->skip_bad, "skip and count bad documents");
  cmd->add_option("--max-frame-bytes", f->max_frame_bytes, "largest accepted frame");
  return f;
}

}  // namespace

Runner SetUpPredict(CLI::App* cmd) {
  auto f = AddPredictOptions(cmd);
  return [f] {
    return RunOnInput(
        f->in, [&] { return RunPredict(f->model, f->in, f->format, f->out, f->skip_bad, f->max_frame_bytes, false); });
  };
}

Runner SetUpInfer(CLI::App* cmd) {
  auto f = AddPredictOptions(cmd);
  return [f] {
    return RunOnInput(
        f->in, [&] { return RunPredict(f->model, f->in, f->format, f->out, f->skip_bad, f->max_frame_bytes, true); });
  };
}

}  // namespace tributary::cli
