// `tributary prequential`: test-then-train over one pass.
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_common.h"
#include "commands/commands.h"
#include "decoded_stream.h"
#include "plot_source.h"
#include "tributary/learner.h"
#include "tributary/metrics.h"

namespace tributary::cli {
namespace {

using json = nlohmann::json;

struct PrequentialFlags {
  LearnFlags learn;
  std::string in, out;
  uint64_t every = 1000;
  bool as_json = false;
  std::string plot;
};

int RunPrequential(const LearnFlags& f, const std::string& in, uint64_t every, bool as_json, const std::string& out,
                   const std::string& plot) {
  // Every refusal names the stream (cli_common.h NameFile).
  auto refuse = [&in](const Status& st) { return ReportError(NameFile(st, in)); };
  auto first = DocumentReader::Open(in, f.max_frame_bytes);
  if (!first.ok()) return refuse(first.status());
  auto length = StreamLength(**first, in, f);
  if (!length.ok()) return refuse(length.status());
  auto mr = NewModelFromFlags(f, Registry(), **first, *length, in);
  if (!mr.ok()) return ReportError(mr.status());  // names the file where it is about the file
  auto model = std::move(mr).value();
  if (model->latent_outputs()) {
    return refuse(Status::InvalidArgument(
        "prequential measures classification accuracy, but family '" + model->family().name +
        "' learns latent components (labels are ignored); use train, then eval for clustering metrics"));
  }
  LearnerOptions lo;
  lo.engine = "sdem";
  lo.seed = f.seed;
  auto lr = Learner::Create(model.get(), lo);
  if (!lr.ok()) return refuse(lr.status());
  auto learner = std::move(lr).value();
  auto ds = DecodedStream::Open(std::move(first).value(), *model);
  if (!ds.ok()) return refuse(ds.status());
  // Progressive (test-then-train) accuracy, log-loss (NCLL, -log p(y | x))
  // and hinge loss (eq. 17, margin 1), cumulative and over the last window.
  ClassificationMetrics total(model->num_outputs()), window(model->num_outputs());
  json curve = json::array();
  BadInput bad;
  Progress progress("prequential", f.quiet || !as_json);
  DocumentBuffer doc;
  if (!as_json)
    std::cout << "documents\taccuracy\twindow_accuracy\tncll\twindow_ncll\thinge\twindow_hinge" << std::endl;
  auto emit = [&]() {
    const bool any = window.labelled() > 0;
    const double nan = std::nan("");
    const double acc = total.accuracy(), win = any ? window.accuracy() : nan;
    const double ncll = total.mean_ncll(), win_ncll = any ? window.mean_ncll() : nan;
    const double hinge = total.mean_hinge(), win_hinge = any ? window.mean_hinge() : nan;
    auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
    if (as_json) {
      curve.push_back({{"documents", total.documents()},
                       {"accuracy", num(acc)},
                       {"window_accuracy", num(win)},
                       {"ncll", num(ncll)},
                       {"window_ncll", num(win_ncll)},
                       {"hinge", num(hinge)},
                       {"window_hinge", num(win_hinge)}});
    } else {
      std::cout << total.documents() << '\t' << Fmt(acc, 4) << '\t' << Fmt(win, 4) << '\t' << Fmt(ncll, 4) << '\t'
                << Fmt(win_ncll, 4) << '\t' << Fmt(hinge, 4) << '\t' << Fmt(win_hinge, 4) << std::endl;  // live readers
    }
    window = ClassificationMetrics(model->num_outputs());
  };
  for (;;) {
    bool eof = false, grew = false;
    Status st = (*ds)->Next(model.get(), true, f.skip_bad, &bad, &doc, &eof, &grew);
    if (!st.ok()) {
      SavePartial(*model, out);
      return refuse(st);
    }
    if (eof) break;
    if (grew) {
      total.Resize(model->num_outputs());
      window.Resize(model->num_outputs());  // (the learner rebuilds itself: learner.h)
    }
    trib_document v = doc.View();
    // Test, then train: Learn() scores the document with the model as it was
    // before this document's update.
    LearnResult outcome;
    if (doc.label < 0 && model->loss_plugin()->loss().requires_label) {
      continue;  // nothing to test or learn from
    }
    st = learner->Learn(v, &outcome);
    if (!st.ok()) {
      if (f.skip_bad && DocumentRefused(st)) {
        bad.Record(st);
        continue;
      }
      SavePartial(*model, out);
      return refuse(st);
    }
    total.Add(outcome.scores->data(), doc.label, model->PerplexityTokens(v));
    window.Add(outcome.scores->data(), doc.label, model->PerplexityTokens(v));
    progress.Tick(total.documents());
    if (every > 0 && total.documents() % every == 0) emit();
  }
  progress.Done(total.documents());
  if (window.documents() > 0 || curve.empty()) emit();
  PrintBad(bad);
  if (total.documents() == 0) return refuse(Status::InvalidArgument("'" + in + "': no document in the stream"));
  if (!out.empty()) {
    Status st = model->Save(out);
    if (!st.ok()) return ReportError(NameFile(st, out));
  }
  json j;
  auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
  j["documents"] = total.documents();
  j["accuracy"] = num(total.accuracy());
  j["macro_f1"] = num(total.macro_f1());
  j["ncll"] = num(total.mean_ncll());
  j["hinge"] = num(total.mean_hinge());
  j["skipped"] = bad.skipped;
  j["curve"] = curve;
  if (!plot.empty()) {
    Status st = DrawLearningCurve(j.dump(), plot, "Prequential accuracy: " + f.family + "/" + f.loss + " on " + in);
    if (!st.ok()) return ReportError(st);
  }
  if (as_json) {
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << "prequential accuracy " << Fmt(total.accuracy(), 4) << " over " << total.documents() << " documents"
              << std::endl;
  }
  return kExitOk;
}

}  // namespace

Runner SetUpPrequential(CLI::App* cmd) {
  auto f = std::make_shared<PrequentialFlags>();
  AddLearnFlags(cmd, &f->learn);
  cmd->add_option("--in", f->in, "labelled stream")->required();
  cmd->add_option("--every", f->every, "report every K documents")->capture_default_str();
  cmd->add_flag("--json", f->as_json, "one JSON object on stdout");
  cmd->add_option("--out", f->out, "also save the final model here");
  cmd->add_option("--plot", f->plot,
                  "also draw the learning curve to this PNG (the Python package's tributary.plot.learning_curve, "
                  "run by /usr/bin/python3 with python3-matplotlib; $TRIBUTARY_PYTHON to use another)");
  return [cmd, f] {
    NoteScheduleGiven(*cmd, &f->learn);
    return RunOnInput(f->in, [&] { return RunPrequential(f->learn, f->in, f->every, f->as_json, f->out, f->plot); });
  };
}

}  // namespace tributary::cli
