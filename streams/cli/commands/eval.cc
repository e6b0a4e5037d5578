// `tributary eval`: evaluate a model on a labelled stream.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands/commands.h"
#include "scoring_input.h"
#include "posterior_summary.h"
#include "tributary/document.h"
#include "tributary/latent_metrics.h"
#include "tributary/metrics.h"
#include "tributary/sep_engine.h"

namespace tributary::cli {
namespace {

using json = nlohmann::json;

struct EvalFlags {
  std::string model, in;
  bool as_json = false, skip_bad = false;
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
};

int RunEval(const std::string& model_path, const std::string& in, bool as_json, bool skip_bad, uint32_t max_frame) {
  auto input = OpenForScoring(model_path, in, max_frame);
  if (!input.ok()) return ReportError(input.status());
  auto& [model, ds, predictor] = *input;
  const bool latent = model->latent_outputs();
  ClassificationMetrics metrics(model->num_outputs());
  std::unique_ptr<LatentMetrics> lat;
  if (latent) lat = std::make_unique<LatentMetrics>(*model);
  std::vector<double> scores(model->num_outputs());
  BadInput bad;
  DocumentBuffer doc;
  for (;;) {
    bool eof = false, grew = false;
    Status st = ds->Next(model.get(), false, skip_bad ? &bad : nullptr, &doc, &eof, &grew);
    if (!st.ok()) return ReportError(NameFile(st, in));
    if (eof) break;
    trib_document v = doc.View();
    st = predictor->Score(v, scores.data());
    if (st.ok() && latent) st = lat->Add(*model, v, scores.data(), predictor->state());
    if (!st.ok()) {
      st = NameFile(st.WithContext(doc.Name()), in);
      if (skip_bad) {
        bad.Record(st);
        continue;
      }
      return ReportError(st);
    }
    if (latent) v.label = -1;  // latent outputs are not classes: perplexity only
    metrics.Add(scores.data(), v.label, model->PerplexityTokens(v));
  }
  PrintBad(bad);
  if (metrics.documents() == 0) return ReportError(Status::InvalidArgument("'" + in + "': no document to evaluate"));
  const auto& c = ds->counters();
  auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
  json j;
  j["documents"] = metrics.documents();
  if (latent) {
    const auto& cm = lat->clusters;
    j["labelled"] = cm.labelled();
    j["accuracy"] = num(cm.accuracy());  // clustering accuracy after the Hungarian mapping
    j["precision"] = num(cm.precision());
    j["recall"] = num(cm.recall());
    j["ncll"] = nullptr;  // no classes to condition on
    j["perplexity"] = num(lat->perplexity());
    j["perplexity_kind"] = model->has_completion() ? "document_completion" : "per_word";
    j["log_likelihood_per_document"] = lat->log_px / static_cast<double>(metrics.documents());
    json sizes = json::array(), weights = json::array(), mapping = json::array();
    const auto map = cm.Mapping();
    for (uint32_t k = 0; k < model->num_outputs(); ++k) {
      sizes.push_back(cm.cluster_size(k));
      weights.push_back(lat->mass[k] / static_cast<double>(metrics.documents()));
      mapping.push_back(map[k] >= 0 && cm.labelled() > 0 ? json(model->schema().classes()[map[k]]) : json(nullptr));
    }
    j["cluster_sizes"] = sizes;
    j["mean_proportions"] = weights;
    j["cluster_labels"] = mapping;
    if (lat->sep) {
      // Sum over the evaluated documents of log E_q[p(x | theta)] (NaN-free:
      // documents whose site the family could not compute are left out and
      // counted in documents - log_evidence_documents).
      j["log_evidence"] = lat->evidence_documents > 0 ? json(lat->log_evidence) : json(nullptr);
      j["log_evidence_per_document"] = lat->evidence_documents > 0
                                           ? json(lat->log_evidence / static_cast<double>(lat->evidence_documents))
                                           : json(nullptr);
      j["log_evidence_documents"] = lat->evidence_documents;
    }
    if (Status st = AddPosteriorSummary(*model, &j); !st.ok()) return ReportError(NameFile(st, model_path));
  } else {
    j["labelled"] = metrics.labelled();
    j["accuracy"] = num(metrics.accuracy());
    j["macro_f1"] = num(metrics.macro_f1());
    j["ncll"] = num(metrics.mean_ncll());
    j["hinge"] = num(metrics.mean_hinge());
    j["perplexity"] = num(metrics.perplexity());
  }
  j["unseen_terms"] = c.unseen_terms;
  j["skipped"] = bad.skipped;
  j["family"] = model->family().name;
  j["loss"] = model->loss_plugin() ? model->loss_plugin()->name : "";
  if (as_json) {
    std::cout << j.dump() << std::endl;
    return kExitOk;
  }
  if (latent) {
    std::cout << "documents     " << metrics.documents() << "\n"
              << "labelled      " << lat->clusters.labelled() << "\n"
              << "accuracy      " << Fmt(lat->clusters.accuracy(), 4) << "  (clusters mapped to labels)\n"
              << "precision     " << Fmt(lat->clusters.precision(), 4) << "\n"
              << "recall        " << Fmt(lat->clusters.recall(), 4) << "\n"
              << "perplexity    " << Fmt(lat->perplexity(), 6)
              << (model->has_completion() ? "  (document completion)\n" : "  (per word)\n") << "cluster_sizes "
              << j["cluster_sizes"].dump() << "\n";
    if (j.contains("mixing_weights")) std::cout << "mixing_weights " << j["mixing_weights"].dump() << "  (E[pi])\n";
    if (lat->sep && lat->evidence_documents > 0) {
      std::cout << "log_evidence  " << Fmt(lat->log_evidence, 8) << "  (approximate, sum of log E_q[p(x | theta)]; "
                << Fmt(lat->log_evidence / static_cast<double>(lat->evidence_documents), 6) << " per document)\n";
    }
    std::cout << "unseen_terms  " << c.unseen_terms << "\n"
              << "skipped       " << bad.skipped << std::endl;
    return kExitOk;
  }
  std::cout << "documents     " << metrics.documents() << "\n"
            << "labelled      " << metrics.labelled() << "\n"
            << "accuracy      " << Fmt(metrics.accuracy(), 4) << "\n"
            << "macro_f1      " << Fmt(metrics.macro_f1(), 4) << "\n"
            << "mean_ncll     " << Fmt(metrics.mean_ncll(), 4) << "\n"
            << "mean_hinge    " << Fmt(metrics.mean_hinge(), 4) << "\n"
            << "perplexity    " << Fmt(metrics.perplexity(), 6) << "  (per word)\n"
            << "unseen_terms  " << c.unseen_terms << "\n"
            << "skipped       " << bad.skipped << std::endl;
  return kExitOk;
}

}  // namespace

Runner SetUpEval(CLI::App* cmd) {
  auto f = std::make_shared<EvalFlags>();
  cmd->add_option("--model", f->model, "model snapshot")->required();
  cmd->add_option("--in", f->in, "test stream")->required();
  cmd->add_flag("--json", f->as_json, "one JSON object on stdout");
  cmd->add_flag("--skip-bad", f->skip_bad, "skip and count bad documents");
  cmd->add_option("--max-frame-bytes", f->max_frame_bytes, "largest accepted frame");
  return [f] {
    return RunOnInput(f->in, [&] { return RunEval(f->model, f->in, f->as_json, f->skip_bad, f->max_frame_bytes); });
  };
}

}  // namespace tributary::cli
