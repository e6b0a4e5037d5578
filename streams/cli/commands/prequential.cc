// `tributary prequential`: test-then-train over one pass.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_common.h"
#include "commands/commands.h"
#include "live_output.h"
#include "plot_source.h"
#include "scoring_input.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/metrics.h"
#include "tributary/model_config.h"
#include "tributary/trainer.h"

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
  // A live stream has no end: a stop signal ends it where it is, and --out
  // is saved now and then meanwhile (live_output.h).
  StopSignals::Install(in);
  Checkpoints checkpoints(f, in, out);
  auto first = DocumentReader::Open(in, f.max_frame_bytes);
  if (!first.ok()) return StopSignals::Received() ? StoppedBeforeLearning("prequential") : refuse(first.status());
  StopSignals::Install(in);  // (a named FIFO's descriptor, now open)
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
  // The live learner (live_learner.h): candidates test-then-train, the best
  // one served, drift detected; --select off: one learner with the flags.
  std::unique_ptr<LiveLearner> live;
  std::unique_ptr<Learner> learner;
  if (f.select == "auto") {
    auto base = ConfigFromFlags(f);
    if (!base.ok()) return ReportError(base.status());
    const Result<ModelSchema> stream_schema = (*first)->schema();
    auto ll = NewDefaultLiveLearner(
        *base, [&](const ModelConfig& c) { return NewModel(c, Registry(), stream_schema, *length, in); });
    if (!ll.ok()) return refuse(ll.status());
    live = std::move(ll).value();
    model.reset();  // (the candidates have their own models; this one was for the checks above)
  } else {
    auto lr = Learner::Create(model.get(), LearnerOptions::Sdem(f.seed));
    if (!lr.ok()) return refuse(lr.status());
    learner = std::move(lr).value();
  }
  // The model that decodes the stream (the live learner's first candidate's).
  Model* schema = live ? live->schema_model() : model.get();
  auto ds = DocumentSource::Open(std::move(first).value(), *schema);
  if (!ds.ok()) return refuse(ds.status());
  // Progressive (test-then-train) accuracy, log-loss (NCLL, -log p(y | x))
  // and hinge loss (eq. 17, margin 1), cumulative and over the last window.
  ClassificationMetrics total(schema->num_outputs()), window(schema->num_outputs());
  json curve = json::array();
  BadInput bad;
  Progress progress("prequential", f.quiet || !as_json);
  DocumentBuffer doc;
  // The live learner's alarms (document indices) not yet reported.
  size_t alarms_reported = 0;
  auto served_label = [&]() -> std::string {
    return live ? live->candidate_stats()[live->served_index()].label : std::string();
  };
  if (!as_json) {
    std::cout << "documents\taccuracy\twindow_accuracy\tncll\twindow_ncll\thinge\twindow_hinge"
              << (live ? "\talarms\tserved" : "") << std::endl;
  }
  auto emit = [&]() {
    const bool any = window.labelled() > 0;
    const double nan = std::nan("");
    const double acc = total.accuracy(), win = any ? window.accuracy() : nan;
    const double ncll = total.mean_ncll(), win_ncll = any ? window.mean_ncll() : nan;
    const double hinge = total.mean_hinge(), win_hinge = any ? window.mean_hinge() : nan;
    auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
    // Alarms since the last line: their documents (live learner only).
    json alarms = json::array();
    std::string alarm_text;
    if (live) {
      for (; alarms_reported < live->alarms().size(); ++alarms_reported) {
        const uint64_t at = live->alarms()[alarms_reported].document;
        alarms.push_back(at);
        alarm_text += (alarm_text.empty() ? "" : ",") + std::to_string(at);
      }
    }
    {
      json point = {{"documents", total.documents()}, {"accuracy", num(acc)},
                    {"window_accuracy", num(win)},    {"ncll", num(ncll)},
                    {"window_ncll", num(win_ncll)},   {"hinge", num(hinge)},
                    {"window_hinge", num(win_hinge)}};
      if (live) {
        point["alarms"] = alarms;
        point["served"] = served_label();
      }
      curve.push_back(std::move(point));  // (for --plot too)
    }
    if (!as_json) {
      std::cout << total.documents() << '\t' << Fmt(acc, 4) << '\t' << Fmt(win, 4) << '\t' << Fmt(ncll, 4) << '\t'
                << Fmt(win_ncll, 4) << '\t' << Fmt(hinge, 4) << '\t' << Fmt(win_hinge, 4);
      if (live) std::cout << '\t' << (alarm_text.empty() ? "-" : alarm_text) << '\t' << served_label();
      std::cout << std::endl;  // live readers
    }
    window = ClassificationMetrics(schema->num_outputs());
  };
  // What the model learned so far, saved when the stream fails.
  auto save_partial = [&]() { SavePartial(live ? live->served() : *model, out); };
  LiveStep live_step;
  // A checkpoint: the live learner whole (without learning its per-class
  // sample, which it saves and resumes), or the one model.
  auto save_checkpoint = [&](const std::string& path) { return live ? live->Save(path) : model->Save(path); };
  for (;;) {
    if (StopSignals::Received()) break;
    bool eof = false, grew = false;
    Status st = (*ds)->Next(schema, true, f.skip_bad ? &bad : nullptr, &doc, &eof, &grew);
    if (!st.ok()) {
      // A stop signal may cut the frame being read (live_output.h): the
      // stream ends before it.
      if (StopSignals::Received()) break;
      save_partial();
      return refuse(st);
    }
    if (eof) break;
    if (grew) {
      if (live) {
        if (Status g = live->SyncClasses(); !g.ok()) {
          save_partial();
          return refuse(g);
        }
      }
      total.Resize(schema->num_outputs());
      window.Resize(schema->num_outputs());  // (the learner rebuilds itself: learner.h)
    }
    trib_document v = doc.View();
    // Test, then train: each learner scores the document with its model as it
    // was before this document's update.
    if (doc.label < 0 && (live || model->loss_plugin()->loss().requires_label)) {
      continue;  // nothing to test or learn from
    }
    LearnResult outcome;
    st = live ? live->Learn(doc, &live_step) : learner->Learn(v, &outcome);
    if (!st.ok()) {
      if (f.skip_bad && DocumentRefused(st)) {
        bad.Record(st);
        continue;
      }
      save_partial();
      return refuse(st);
    }
    const double* scores = live ? live_step.scores->data() : outcome.scores->data();
    total.Add(scores, doc.label, schema->PerplexityTokens(v));
    window.Add(scores, doc.label, schema->PerplexityTokens(v));
    progress.Tick(total.documents());
    if (every > 0 && total.documents() % every == 0) emit();
    checkpoints.After(total.documents(), save_checkpoint);
  }
  progress.Done(total.documents());
  if (StopSignals::Received()) ReportStopped("prequential", total.documents(), out);
  if (window.documents() > 0 || curve.empty()) emit();
  PrintBad(bad);
  if (total.documents() == 0 && StopSignals::Received()) return StoppedBeforeLearning("prequential");
  if (total.documents() == 0) return refuse(Status::InvalidArgument("'" + in + "': no document in the stream"));
  if (!out.empty()) {
    // The stream ended: the documents held in the per-class sample are
    // learned (LiveLearner::Flush), then the live learner is saved whole
    // (LiveLearner::Save): the served candidate's model, which predict and
    // eval read, and the rest of the learner (the other candidates, windows,
    // detector), which serve --model, Python's tributary.load and inspect
    // resume. Python's learn_one, flush() and save give the same learner.
    if (live) {
      if (Status st = live->Flush(); !st.ok()) return refuse(st);
    }
    Status st = live ? live->Save(out) : model->Save(out);
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
  // Per class: recall over the whole stream, and the pairs confused most
  // (a drift that hits a few classes shows here, not in the overall curve).
  const ModelSchema& classes = schema->schema();
  auto class_name = [&](uint32_t k) { return k < classes.classes().size() ? classes.classes()[k] : std::to_string(k); };
  json per_class = json::array();
  struct Confused {
    uint64_t count;
    uint32_t truth, predicted;
  };
  std::vector<Confused> confused;
  for (uint32_t t = 0; t < total.num_classes(); ++t) {
    uint64_t docs = 0;
    for (uint32_t p = 0; p < total.num_classes(); ++p) {
      const uint64_t c = total.confusion(t, p);
      docs += c;
      if (p != t && c > 0) confused.push_back({c, t, p});
    }
    if (docs == 0) continue;
    per_class.push_back({{"class", class_name(t)},
                         {"documents", docs},
                         {"recall", static_cast<double>(total.confusion(t, t)) / static_cast<double>(docs)}});
  }
  std::stable_sort(confused.begin(), confused.end(),
                   [](const Confused& a, const Confused& b) { return a.count > b.count; });
  if (confused.size() > 10) confused.resize(10);
  json most_confused = json::array();
  for (const Confused& c : confused) {
    most_confused.push_back(
        {{"class", class_name(c.truth)}, {"predicted", class_name(c.predicted)}, {"documents", c.count}});
  }
  j["per_class"] = per_class;
  j["most_confused"] = most_confused;
  if (live) j["live"] = json::parse(live->ToJson());
  if (!plot.empty()) {
    Status st = DrawLearningCurve(j.dump(), plot, "Prequential accuracy: " + f.family + "/" + f.loss + " on " + in);
    if (!st.ok()) return ReportError(st);
  }
  if (as_json) {
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << "prequential accuracy " << Fmt(total.accuracy(), 4) << " over " << total.documents() << " documents"
              << std::endl;
    // The classes recalled worst, and the confusions (at most five of each).
    std::vector<std::pair<double, std::string>> worst;
    for (const auto& c : per_class) worst.emplace_back(c["recall"].get<double>(), c["class"].get<std::string>());
    std::stable_sort(worst.begin(), worst.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::cout << "lowest recall:";
    for (size_t i = 0; i < worst.size() && i < 5; ++i)
      std::cout << ' ' << worst[i].second << ' ' << Fmt(worst[i].first, 3);
    std::cout << "\nmost confused:";
    for (size_t i = 0; i < confused.size() && i < 5; ++i) {
      std::cout << ' ' << class_name(confused[i].truth) << "->" << class_name(confused[i].predicted) << " ("
                << confused[i].count << ")";
    }
    std::cout << std::endl;
    if (live) {
      std::cout << "live learner: served '" << served_label() << "' (" << live->switches() << " switch(es)); "
                << live->alarms().size() << " drift alarm(s)";
      for (size_t i = 0; i < live->alarms().size() && i < 20; ++i) {
        std::cout << (i ? ", " : " at documents ") << live->alarms()[i].document;
      }
      std::cout << "\n";
      for (const LiveCandidateStats& c : live->candidate_stats()) {
        std::cout << "  " << (c.served ? "* " : "  ") << c.label << ": accuracy " << Fmt(c.accuracy, 4) << ", windowed "
                  << Fmt(c.window_accuracy, 4) << ", class-balanced sample "
                  << (c.sample_accuracy < 0 ? std::string("-") : Fmt(c.sample_accuracy, 4)) << "\n";
      }
      std::cout << std::flush;
    }
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
  cmd->add_option("--out", f->out,
                  "also save the final model here (the live learner whole: its served candidate predicts, serve "
                  "--model and Python resume the learner)");
  AddSaveFlags(cmd, &f->learn);
  cmd->add_option("--select", f->learn.select,
                  "auto: the live learner (candidates with long and short memories and the generative NLL "
                  "learner test-then-train, the best recent one served, drift detected by ADWIN); off: one "
                  "learner with the given settings")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "off"}));
  cmd->add_option("--plot", f->plot,
                  "also draw the learning curve to this PNG (the Python package's tributary.plot.learning_curve, "
                  "run by /usr/bin/python3 with python3-matplotlib; $TRIBUTARY_PYTHON to use another)");
  return [cmd, f] {
    NoteScheduleGiven(*cmd, &f->learn);
    return RunOnInput(f->in, [&] { return RunPrequential(f->learn, f->in, f->every, f->as_json, f->out, f->plot); });
  };
}

}  // namespace tributary::cli
