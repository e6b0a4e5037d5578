// `tributary train`: learn a model from a stream (sdEM, or SEP / EP / ADF),
// by default choosing among a few settings on the training stream.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_common.h"
#include "commands/commands.h"
#include "commands/train_distributed.h"
#include "scoring_input.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/parallel.h"
#include "tributary/sep_engine.h"
#include "tributary/trainer.h"

namespace tributary::cli {
namespace {

// The documents' views, in `*out` (reused).
const std::vector<trib_document>& Views(const std::vector<DocumentBuffer>& docs, std::vector<trib_document>* out) {
  out->clear();
  for (const auto& d : docs) out->push_back(d.View());
  return *out;
}

struct TrainFlags {
  LearnFlags learn;
  std::string in, out;
};

}  // namespace

// train without tuning flags, for a discriminative loss: candidates chosen on
// the training stream (lib/include/tributary/trainer.h).
int RunTrainSelect(const LearnFlags& f, const std::string& in, const std::string& out,
                   std::unique_ptr<Model> schema_model, std::unique_ptr<DocumentReader> reader, uint64_t length,
                   const TrainerGroup* group) {
  // With a group (the MPI ranks) every member reads the whole stream and
  // searches its share of the candidates; rank 0 writes and reports.
  const bool lead = group == nullptr || group->rank() == 0;
  const bool quiet = f.quiet || !lead;
  const bool streaming = group == nullptr && (in == "-" || f.epochs == 1);
  // Every refusal names the training stream (cli_common.h NameFile); with a
  // group, rank 0 says it for every rank (an error only another rank met
  // comes to it named by that rank).
  auto refuse = [&in, lead](const Status& st) { return lead ? ReportError(NameFile(st, in)) : kExitError; };
  const Result<ModelSchema> stream_schema = reader->schema();  // (copies share the vocabulary)
  auto base = ConfigFromFlags(f);
  if (!base.ok()) return ReportError(base.status());
  TrainerConfig cfg;
  cfg.candidates = DefaultCandidates(*base, streaming, &schema_model->family());
  cfg.epochs = f.epochs;
  cfg.shuffle = !f.no_shuffle;
  cfg.seed = f.seed;
  cfg.threads = group != nullptr ? 1 : f.threads;  // one thread per rank
  cfg.search_documents = f.search_documents;
  cfg.group = group;
  BadInput bad;
  if (f.skip_bad) cfg.on_bad = [&bad](const Status& st) { bad.Record(st); };
  Model* classes_from = schema_model.get();
  ModelFactory factory = [&](const CandidateSpec& c) -> Result<std::unique_ptr<Model>> {
    auto m = NewModel(CandidateConfig(*base, c), Registry(), stream_schema, length, in);
    if (!m.ok()) return m.status();
    // The documents were decoded into classes_from's ids: classes and terms
    // (an open vocabulary) it gained while reading mean the same here.
    if (classes_from != nullptr) TRIB_RETURN_IF_ERROR((*m)->GrowTo(classes_from->schema()));
    return m;
  };
  Progress progress("train", quiet);
  uint64_t steps = 0;
  auto start = std::chrono::steady_clock::now();
  TrainReport report;
  std::unique_ptr<Model> model;
  uint64_t documents = 0;
  DocumentBuffer doc;
  if (!streaming) {
    // Decode once into memory (labels as class indices of schema_model).
    DocumentSet docs;
    auto ds = DocumentSource::OpenPass(&reader, in, f.max_frame_bytes, *schema_model);
    Status opened = ds.ok() ? Status::OK() : ds.status();
    Status agreed;
    // (Every member of a group goes on, or stops, together.)
    if (group != nullptr && group->AnyFailed(opened, &agreed)) return refuse(agreed);
    if (!opened.ok()) return refuse(opened);
    for (;;) {
      bool eof = false, grew = false;
      Status st = (*ds)->Next(schema_model.get(), true, f.skip_bad ? &bad : nullptr, &doc, &eof, &grew);
      if (group != nullptr && (!st.ok() || eof)) {
        // A group writes no .partial: the ranks may have read different
        // amounts before a failure (rerun on one process to keep them).
        if (group->AnyFailed(st, &agreed)) return refuse(agreed);
        break;
      }
      if (!st.ok()) {
        // Nothing is lost: the documents read before the damage are learned
        // (the same way) and saved to <out>.partial.
        if (!docs.empty()) {
          auto r = Trainer::TrainOffline(factory, cfg, docs, &report);
          if (r.ok()) {
            (*r)->set_training_report(report.ToJson());
            SavePartial(**r, out);
          }
        }
        return refuse(st);
      }
      if (eof) break;
      docs.Add(doc);
    }
    documents = docs.size();
    if (docs.empty()) return refuse(Status::InvalidArgument("'" + in + "': no document was learned (empty stream?)"));
    auto r = Trainer::TrainOffline(factory, cfg, docs, &report, [&](uint64_t n) { progress.Tick(steps = n); });
    if (!r.ok()) return refuse(r.status().WithContext("'" + in + "'"));
    model = std::move(r).value();
  } else {
    classes_from = nullptr;  // the trainer's first candidate decodes the stream
    auto tr = Trainer::Create(factory, cfg);
    if (!tr.ok()) return refuse(tr.status());
    std::unique_ptr<Trainer> trainer = std::move(tr).value();
    auto ds = DocumentSource::OpenPass(&reader, in, f.max_frame_bytes, *trainer->schema_model());
    if (!ds.ok()) return refuse(ds.status());
    auto fail = [&](const Status& st) {
      if (documents > 0) {
        auto r = trainer->Finish(&report);
        if (r.ok()) {
          (*r)->set_training_report(report.ToJson());
          SavePartial(**r, out);
        }
      }
      return refuse(st);
    };
    for (;;) {
      bool eof = false, grew = false;
      Status st = (*ds)->Next(trainer->schema_model(), true, f.skip_bad ? &bad : nullptr, &doc, &eof, &grew);
      if (!st.ok()) return fail(st);
      if (eof) break;
      if (grew) {
        if (Status g = trainer->SyncClasses(); !g.ok()) return fail(g);
      }
      st = trainer->Learn(doc);
      if (!st.ok()) {
        if (f.skip_bad && DocumentRefused(st)) {
          bad.Record(st);
          continue;
        }
        return fail(st.WithContext("'" + in + "'"));
      }
      progress.Tick(++documents);
    }
    if (documents == 0) {
      return refuse(Status::InvalidArgument("'" + in + "': no document was learned (empty stream?)"));
    }
    auto r = trainer->Finish(&report);
    if (!r.ok()) return refuse(r.status().WithContext("'" + in + "'"));
    model = std::move(r).value();
  }
  progress.Done(documents);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!lead) return kExitOk;
  PrintBad(bad);
  model->learner_state().skipped_documents += bad.skipped;
  model->set_training_report(report.ToJson());
  Status st = model->Save(out);
  if (!st.ok()) return ReportError(NameFile(st, out));
  if (!quiet) {
    std::ostringstream os;
    os << "chose '" << report.kept << "' on " << report.validation_documents << " held-out training documents ("
       << report.mode << ";";
    for (const auto& c : report.candidates) {
      os << " " << c.label << ": " << Fmt(100 * c.validation_accuracy, 4) << "%";
      if (report.mode == "offline") os << " after " << c.epochs << " pass(es)";
      os << ",";
    }
    std::string line = os.str();
    line.back() = ')';
    const std::string on_ranks = group != nullptr ? " on " + std::to_string(group->size()) + " MPI ranks" : "";
    std::cerr << line << "\ntrained " << model->family().name << "/" << model->loss_plugin()->name << " on "
              << documents << " documents" << on_ranks << " (" << report.final_epochs
              << " pass(es) of the kept setting, " << report.document_updates << " updates while choosing) in "
              << Fmt(secs, 3) << " s -> " << out << std::endl;
  }
  return kExitOk;
}

// train --in - (or --epochs 1) without tuning flags: standard input is seen
// once, as a live stream, so it is learned as serve and prequential learn
// one (the live learner, live_learner.h): candidates test-then-train, the best recent one
// served, drift detected. At the end of the stream the documents held in
// its per-class sample are learned; --out holds the learner whole (its
// served candidate predicts; serve --model and Python resume it).
int RunTrainLive(const LearnFlags& f, const std::string& in, const std::string& out,
                 std::unique_ptr<DocumentReader> reader, uint64_t length) {
  // (Also run by rank 0 of train --distributed.)
  auto refuse = [&in](const Status& st) { return ReportError(NameFile(st, in)); };
  auto base = ConfigFromFlags(f);
  if (!base.ok()) return ReportError(base.status());
  const Result<ModelSchema> stream_schema = reader->schema();
  auto made = NewDefaultLiveLearner(
      *base, [&](const ModelConfig& c) { return NewModel(c, Registry(), stream_schema, length, in); });
  if (!made.ok()) return refuse(made.status());
  std::unique_ptr<LiveLearner> live = std::move(made).value();
  auto ds = DocumentSource::Open(std::move(reader), *live->schema_model());
  if (!ds.ok()) return refuse(ds.status());
  Progress progress("train", f.quiet);
  BadInput bad;
  DocumentBuffer doc;
  uint64_t documents = 0, unlabelled = 0;
  const auto start = std::chrono::steady_clock::now();
  auto save = [&](const std::string& path) { return live->Save(path); };
  for (;;) {
    bool eof = false, grew = false;
    Status st = (*ds)->Next(live->schema_model(), true, f.skip_bad ? &bad : nullptr, &doc, &eof, &grew);
    if (st.ok() && grew) st = live->SyncClasses();
    if (!st.ok()) {
      // Nothing is lost: what was learned is saved to <out>.partial.
      if (documents > 0) (void)save(out + ".partial");
      return refuse(st);
    }
    if (eof) break;
    st = live->Learn(doc);
    if (!st.ok()) {
      if (f.skip_bad && DocumentRefused(st)) {
        bad.Record(st);
        unlabelled += doc.label < 0;
        continue;
      }
      if (documents > 0) (void)save(out + ".partial");
      return refuse(st.WithContext("'" + in + "'"));
    }
    progress.Tick(++documents);
  }
  progress.Done(documents);
  PrintBad(bad);
  if (documents == 0) return refuse(Status::InvalidArgument("'" + in + "': no document was learned (empty stream?)"));
  // The stream ended: the documents held in the per-class sample are learned.
  if (Status st = live->Flush(); !st.ok()) return refuse(st);
  live->served().learner_state().skipped_documents += bad.skipped;
  if (Status st = save(out); !st.ok()) return ReportError(NameFile(st, out));
  if (!f.quiet) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::ostringstream os;
    os << "live learner (one pass, arrival order): served '" << live->candidate_stats()[live->served_index()].label
       << "' (prequential accuracy";
    for (const LiveCandidateStats& c : live->candidate_stats()) {
      os << " " << c.label << ": " << Fmt(100 * c.accuracy, 4) << "% (recent " << Fmt(100 * c.window_accuracy, 4)
         << "%),";
    }
    std::string line = os.str();
    line.back() = ')';
    std::cerr << line << "; " << live->alarms().size() << " drift alarm(s), " << live->switches()
              << " switch(es)\ntrained " << live->served().family().name << " on " << documents << " documents in "
              << Fmt(secs, 3) << " s -> " << out << std::endl;
  }
  return kExitOk;
}

namespace {

int RunTrain(const LearnFlags& flags, const std::string& in, const std::string& out) {
  LearnFlags f = flags;
  const bool ep_family = f.engine != "sdem";
  // SEP / EP / ADF use no loss; the snapshot records nll (the posterior they
  // approximate is the likelihood's) whatever --loss says.
  if (ep_family) f.loss = "nll";
  // Every refusal names the training stream (cli_common.h NameFile), or the
  // file it is about (--resume, --out).
  auto refuse = [&in](const Status& st) { return ReportError(NameFile(st, in)); };
  auto first = DocumentReader::Open(in, f.max_frame_bytes);
  if (!first.ok()) return refuse(first.status());
  auto length = StreamLength(**first, in, f);
  if (!length.ok()) return refuse(length.status());
  std::unique_ptr<Model> model;
  if (!f.resume.empty()) {
    // Continue a snapshot with its own family, loss, options, schedule and
    // step counter (n too, unless --n is given): one learner, arrival order.
    if (ep_family) return ReportError(Status::InvalidArgument("--resume continues sdEM models only"));
    auto lr = Model::Load(f.resume, Registry());
    if (!lr.ok()) return ReportError(NameFile(lr.status(), f.resume));
    model = std::move(lr).value();
    if (model->family().family().sep != nullptr && model->latent_outputs()) {
      return ReportError(Status::InvalidArgument("--resume: '" + f.resume + "' is a " + model->family().name +
                                                 " model (SEP/EP/ADF); only sdEM models can be resumed"));
    }
    if (!model->loss_plugin()) {
      return ReportError(Status::InvalidArgument("--resume: '" + f.resume + "' records no loss"));
    }
    if (f.n > 0) model->learner_state().effective_size = f.n;
    f.select = "off";
  } else {
    auto mr = NewModelFromFlags(f, Registry(), **first, *length, in);
    if (!mr.ok()) return ReportError(mr.status());  // names the file where it is about the file
    model = std::move(mr).value();
  }
  std::unique_ptr<DocumentReader> reader = std::move(first).value();
  // Defaults that work: a discriminative loss on class outputs, with the
  // choice left to the program, goes through the Trainer; one pass in arrival
  // order (standard input, or --epochs 1) through the live learner. (The same
  // rule as the live front ends': live_learner.h LiveLearnerApplies.) The
  // same flags mean the same on one process, threads and MPI ranks.
  TrainMode mode = TrainMode::kOneLearner;
  if (!ep_family && LiveLearnerApplies(f.select, "sdem", *model)) {
    const bool one_pass = (in == "-" ? f.epochs <= 1 : f.epochs == 1) && !f.shuffle && !f.threads_given;
    mode = one_pass ? TrainMode::kLive : TrainMode::kSelect;
  }
  // mpirun -np N tributary train --distributed.
  if (f.distributed) return RunTrainDistributed(f, in, out, mode, std::move(model), std::move(reader), *length);
  if (f.restarts > 1 && !ep_family) {
    return ReportError(
        Status::InvalidArgument("--restarts needs --engine sep, ep or adf (sdEM has no evidence to "
                                "choose a restart by)"));
  }
  // --threads with one learner: rounds of documents split across threads
  // (parallel.h). Not given: one thread, whatever the machine.
  const uint32_t threads =
      f.threads_given ? (f.threads > 0 ? f.threads : std::max(1u, std::thread::hardware_concurrency())) : 1;
  if (threads > 1 && f.restarts > 1) {
    return ReportError(
        Status::InvalidArgument("--threads > 1 cannot be combined with --restarts (each restart "
                                "would need its own threads); use one or the other"));
  }
  if (f.epochs > 1 && in == "-" && !f.shuffle) {
    return ReportError(Status::InvalidArgument("--epochs > 1 needs a file (or --shuffle), not standard input"));
  }
  if (mode == TrainMode::kLive) return RunTrainLive(f, in, out, std::move(reader), *length);
  if (mode == TrainMode::kSelect) return RunTrainSelect(f, in, out, std::move(model), std::move(reader), *length);
  if (f.epochs == 0) f.epochs = 1;
  // Several passes over a file are shuffled (scikit-learn's SGD does the
  // same); --no-shuffle keeps the arrival order.
  if (f.epochs > 1 && in != "-" && !f.no_shuffle) f.shuffle = true;
  if (f.no_shuffle) f.shuffle = false;
  std::unique_ptr<Learner> learner;  // sdEM, or SEP / EP / ADF (learner.h)
  // Restarts (SEP / EP / ADF): replicas with seeds seed + 1, ... learn the
  // same documents as the main model until the restart window closes; then
  // the one whose documents had the highest approximate log evidence (the
  // sum of their log Z_i, each computed before the document was learned:
  // log p(x_i | x_1..i-1) under the approximation) is kept.
  struct Replica {
    std::unique_ptr<Model> model;
    std::unique_ptr<Learner> learner;
    uint64_t seed = 0;
    double log_z = 0;     // sum of the finite log Z_i in the window
    uint64_t scored = 0;  // documents with a finite log Z_i
  };
  std::vector<Replica> replicas;  // [0] is the main model while the window is open
  if (ep_family) {
    auto engine = ParseSepEngine(f.engine);
    if (!engine.ok()) return refuse(engine.status());
    for (uint32_t r = 0; r < f.restarts; ++r) {
      Replica rep;
      rep.seed = f.seed + r;
      if (r == 0) {
        rep.model = std::move(model);
      } else {
        LearnFlags fr = f;
        fr.seed = rep.seed;
        auto mr2 = NewModelFromFlags(fr, Registry(), *reader, *length, in);
        if (!mr2.ok()) return ReportError(mr2.status());
        rep.model = std::move(mr2).value();
      }
      LearnerOptions lo;
      lo.engine = f.engine;
      lo.effective_size = rep.model->learner_state().effective_size;
      lo.damping = f.damping;
      lo.seed = rep.seed;
      auto sl = Learner::Create(rep.model.get(), lo);
      if (!sl.ok()) return refuse(sl.status());
      rep.learner = std::move(sl).value();
      replicas.push_back(std::move(rep));
    }
    model = std::move(replicas[0].model);
    learner = std::move(replicas[0].learner);
    if (f.restarts == 1) replicas.clear();
  } else {
    auto lr = Learner::Create(model.get(), LearnerOptions::Sdem(f.seed));
    if (!lr.ok()) return refuse(lr.status());
    learner = std::move(lr).value();
  }
  std::unique_ptr<ParallelLearner> par;
  BadInput bad;
  if (threads > 1) {
    ParallelOptions po;
    po.threads = threads;
    po.sync_every = f.sync_every;  // 0: the library's default for the model's size
    po.learner.engine = ep_family ? f.engine : "sdem";
    po.learner.seed = f.seed;
    po.learner.effective_size = model->learner_state().effective_size;
    po.learner.damping = f.damping;
    if (f.skip_bad) {
      po.on_bad = [&bad, &model](const Status& st) {
        bad.Record(st);
        model->learner_state().skipped_documents++;
      };
    }
    learner.reset();  // the parallel learner makes its own, on the same model
    auto pr = ParallelLearner::Create(model.get(), po);
    if (!pr.ok()) return refuse(pr.status().WithContext("--threads " + std::to_string(threads)));
    par = std::move(pr).value();
  }
  // A new class (open schema): the learner rebuilds itself for a classifier's
  // new layout (learner.h); latent families only name their classes, and the
  // restart replicas get the names too.
  auto renew = [&]() -> Status {
    for (size_t r = 1; r < replicas.size(); ++r) {
      for (const auto& c : model->schema().classes()) {
        if (replicas[r].model->schema().ClassIndex(c) < 0) TRIB_RETURN_IF_ERROR(replicas[r].model->AddClass(c));
      }
    }
    return Status::OK();
  };
  Progress progress("train", f.quiet);
  uint64_t seen = 0;
  const uint64_t window = f.restart_window;
  std::string restart_report;
  // Keeps the replica with the highest sum of log Z_i (ties: the lower seed).
  auto choose = [&]() {
    size_t best = 0;
    for (size_t r = 1; r < replicas.size(); ++r) {
      const Replica &a = replicas[r], &b = replicas[best];
      if (a.scored > b.scored || (a.scored == b.scored && a.log_z > b.log_z)) best = r;
    }
    std::ostringstream msg;
    msg << "restarts: kept seed " << replicas[best].seed << " of " << replicas.size() << " after " << seen
        << " documents (sum of log Z_i:";
    for (const auto& r : replicas) msg << " seed " << r.seed << " " << Fmt(r.log_z, 8);
    msg << ")";
    restart_report = msg.str();
    model = std::move(replicas[best].model);  // replicas[0] holds the main model while choosing
    learner = std::move(replicas[best].learner);
    replicas.clear();
  };
  auto learn_one = [&](const trib_document& doc) -> Status {
    LearnResult outcome;
    Status st = learner->Learn(doc, &outcome);
    if (st.ok() && !replicas.empty()) {
      // replicas[0]'s model and learner live in `model` / `learner` meanwhile.
      if (std::isfinite(outcome.log_z) && !outcome.skipped) {
        replicas[0].log_z += outcome.log_z;
        ++replicas[0].scored;
      }
      for (size_t r = 1; r < replicas.size(); ++r) {
        LearnResult o;
        Status rs = replicas[r].learner->Learn(doc, &o);
        if (!rs.ok()) return rs.WithContext("restart with seed " + std::to_string(replicas[r].seed));
        if (std::isfinite(o.log_z) && !o.skipped) {
          replicas[r].log_z += o.log_z;
          ++replicas[r].scored;
        }
      }
    }
    if (!st.ok()) {
      if (f.skip_bad && DocumentRefused(st)) {
        bad.Record(st);
        model->learner_state().skipped_documents++;
        return Status::OK();
      }
      return st;
    }
    progress.Tick(++seen);
    if (!replicas.empty() && window > 0 && seen == window) {
      replicas[0].model = std::move(model);
      replicas[0].learner = std::move(learner);
      choose();
    }
    return Status::OK();
  };
  // --threads: documents in rounds of the parallel learner.
  auto learn_batch = [&](const std::vector<trib_document>& views) -> Status {
    const uint64_t skipped_before = bad.skipped;
    TRIB_RETURN_IF_ERROR(par->Learn(views.data(), views.size()));
    seen += views.size() - (bad.skipped - skipped_before);
    progress.Tick(seen);
    return Status::OK();
  };
  const size_t round_docs =
      par ? static_cast<size_t>(threads) * (f.sync_every > 0 ? f.sync_every : DefaultSyncEvery(model->stats().size()))
          : 0;
  std::vector<trib_document> views;
  std::vector<DocumentBuffer> batch;
  // The end of the first pass closes the window when --restart-window is 0
  // (or longer than the pass).
  auto end_of_pass = [&]() {
    if (replicas.empty()) return;
    replicas[0].model = std::move(model);
    replicas[0].learner = std::move(learner);
    choose();
  };
  auto fail = [&](const Status& st) {
    SavePartial(*model, out);
    return refuse(st);
  };
  auto start = std::chrono::steady_clock::now();
  DocumentBuffer doc;
  if (f.shuffle) {
    // Decode once into memory, then shuffle per epoch (Algorithm 1, line 0):
    // the order of the documents, which stay where they are (DocumentSet:
    // compact, fetched ahead in the shuffled order).
    DocumentSet docs;
    auto ds = DocumentSource::OpenPass(&reader, in, f.max_frame_bytes, *model);
    if (!ds.ok()) return refuse(ds.status());
    for (;;) {
      bool eof = false, grew = false;
      Status st = (*ds)->Next(model.get(), true, f.skip_bad ? &bad : nullptr, &doc, &eof, &grew);
      if (!st.ok()) return fail(st);
      if (eof) break;
      if (grew) {
        if (Status g = renew(); !g.ok()) return fail(g);
      }
      docs.Add(doc);
    }
    std::vector<uint32_t> order(docs.size());
    std::iota(order.begin(), order.end(), 0u);
    std::mt19937_64 rng(f.seed);
    const size_t n = order.size();
    for (uint32_t e = 0; e < f.epochs; ++e) {
      std::shuffle(order.begin(), order.end(), rng);
      if (par) {
        views.clear();
        for (uint32_t i : order) views.push_back(docs.View(i));
        Status st = learn_batch(views);
        if (!st.ok()) return fail(st);
        continue;
      }
      for (size_t j = 0; j < n; ++j) {
        if (j + 8 < n) docs.PrefetchRecord(order[j + 8]);
        if (j + 4 < n) docs.Prefetch(order[j + 4]);
        Status st = learn_one(docs.View(order[j]));
        if (!st.ok()) return fail(st);
      }
      end_of_pass();
    }
  } else {
    for (uint32_t e = 0; e < f.epochs; ++e) {
      auto ds = DocumentSource::OpenPass(&reader, in, f.max_frame_bytes, *model);
      if (!ds.ok()) return fail(ds.status());
      for (;;) {
        bool eof = false, grew = false;
        Status st = (*ds)->Next(model.get(), true, (f.skip_bad && e == 0) ? &bad : nullptr, &doc, &eof, &grew);
        if (!st.ok()) {
          if (f.skip_bad && e > 0) continue;  // already reported in epoch 1
          return fail(st);
        }
        if (eof) break;
        if (grew) {
          if (Status g = renew(); !g.ok()) return fail(g);
        }
        if (par) {
          // A round's documents are decoded first (the model may grow
          // between rounds, never during one).
          batch.push_back(doc);
          if (batch.size() == round_docs) {
            st = learn_batch(Views(batch, &views));
            if (!st.ok()) return fail(st);
            batch.clear();
          }
          continue;
        }
        st = learn_one(doc.View());
        if (!st.ok()) return fail(st);
      }
      if (par && !batch.empty()) {
        Status st = learn_batch(Views(batch, &views));
        if (!st.ok()) return fail(st);
        batch.clear();
      }
      end_of_pass();
    }
  }
  progress.Done(seen);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintBad(bad);
  if (seen == 0) {
    return refuse(Status::InvalidArgument("'" + in + "': no document was learned (empty stream?)"));
  }
  // SEP's counters (summed over the threads' shards with --threads).
  const SepLearner* sep = par ? par->shard(0).sep() : learner->sep();
  SepCounters sep_counters;
  if (sep != nullptr) {
    for (uint32_t r = 0; r < (par ? par->threads() : 1u); ++r) {
      const SepCounters& c = par ? par->shard(r).sep()->counters() : sep->counters();
      sep_counters.updates += c.updates;
      sep_counters.skipped_infeasible += c.skipped_infeasible;
      sep_counters.moves += c.moves;
      sep_counters.log_evidence += c.log_evidence;
    }
  }
  if (sep && sep_counters.updates == 0) {
    // Every update was infeasible (e.g. SEP with --damping above 1/N
    // extrapolates each site by N * damping): the model is still the prior.
    std::string why = "every one of the " + std::to_string(sep_counters.skipped_infeasible) +
                      " updates would have left the feasible set and was skipped; the model is still the prior";
    if (f.engine == "sep" && sep->damping() * sep->effective_size() > 1.0) {
      why += " (--damping " + Fmt(sep->damping(), 6) + " > 1/N = " + Fmt(1.0 / sep->effective_size(), 6) +
             ": each site is applied " + Fmt(sep->damping() * sep->effective_size(), 4) +
             " times over; use a smaller --damping)";
    }
    return refuse(Status::Numeric("'" + in + "': " + why));
  }
  Status st = model->Save(out);
  if (!st.ok()) return ReportError(NameFile(st, out));
  if (!f.quiet && !restart_report.empty()) std::cerr << restart_report << std::endl;
  const std::string on_threads = par ? " on " + std::to_string(threads) + " threads" : std::string();
  if (!f.quiet && sep) {
    const auto& c = sep_counters;
    std::cerr << "trained " << model->family().name << " by " << f.engine << " on " << seen << " documents ("
              << f.epochs << " pass(es), N = " << sep->effective_size() << ", damping " << sep->damping() << ", "
              << c.skipped_infeasible << " infeasible updates skipped, "
              << (c.moves > 0 ? std::to_string(c.moves) + " structural move(s), " : std::string()) << "sum of log Z_i "
              << Fmt(c.log_evidence, 8)
              << (f.engine == "ep" ? ", " + std::to_string(sep->SiteBytes()) + " bytes of sites" : std::string()) << ")"
              << on_threads << " in " << Fmt(secs, 3) << " s -> " << out << std::endl;
  } else if (!f.quiet) {
    const auto& ls = model->learner_state();
    std::cerr << "trained " << model->family().name << "/" << model->loss_plugin()->name << " on " << seen
              << " document updates (" << f.epochs << " epoch(s), " << ls.schedule.ToString()
              << ", n = " << ls.effective_size << ")" << on_threads << " in " << Fmt(secs, 3) << " s ("
              << Fmt(static_cast<double>(seen) / std::max(secs, 1e-9), 4) << " documents/s) -> " << out << std::endl;
  }
  return kExitOk;
}

}  // namespace

Runner SetUpTrain(CLI::App* cmd) {
  auto f = std::make_shared<TrainFlags>();
  AddLearnFlags(cmd, &f->learn);
  cmd->add_option("--engine", f->learn.engine,
                  "sdem, or sep / ep / adf for families with SEP hooks (emsd-, edcm-mixture)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sdem", "sep", "ep", "adf"}));
  cmd->add_option(
         "--damping", f->learn.damping,
         "SEP: eps of the damped site update (default 1/N; above 1/N each site is applied N eps times over); EP: "
         "site damping (default 1); in (0, 1]")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double d = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0' || !(d > 0 && d <= 1)) {
              return "--damping: expected a number in (0, 1], found '" + v + "'";
            }
            return "";
          },
          "(0, 1]"));
  cmd->add_option("--restarts", f->learn.restarts,
                  "SEP/EP/ADF: learn with seeds seed .. seed + R - 1 side by side and keep the model whose documents "
                  "had the highest approximate log evidence (sum of log Z_i)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  cmd->add_option("--restart-window", f->learn.restart_window,
                  "documents after which the best restart is kept (default 0: the end of the first pass)")
      ->capture_default_str();
  cmd->add_option("--epochs", f->learn.epochs,
                  "passes over the stream (EP: sweeps). Default: NCLL/hinge on a file choose it on a validation split "
                  "of the training stream (early stopping, at most 20); otherwise 1")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--shuffle", f->learn.shuffle,
                "shuffle the documents (in memory) before each epoch (the default for several passes over a file)");
  cmd->add_flag("--no-shuffle", f->learn.no_shuffle, "keep the arrival order, even over several passes");
  cmd->add_option("--select", f->learn.select,
                  "auto: NCLL/hinge try a few priors (and margins) and the generative NLL learner, and keep the "
                  "best on held-out training documents (never the test split); off: one learner with the given "
                  "settings")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "off"}));
  cmd->add_option("--threads", f->learn.threads,
                  "--select auto on a file: candidates learn on this many threads (0: one per core; the model does "
                  "not depend on it). One learner (--select off, nll, --engine sep): when given, each round's "
                  "documents are split across this many threads and the shards' statistics composed (NLL/SEP) or "
                  "averaged (NCLL/hinge); reproducible for a fixed --seed and --threads; default one thread")
      ->capture_default_str();
  cmd->add_option("--sync-every", f->learn.sync_every,
                  "--threads / --distributed: documents each thread or rank learns between two compositions "
                  "(default: statistics / " +
                      std::to_string(kStatisticsPerSyncDocument) + ", at least " + std::to_string(kMinSyncEvery) +
                      ", at most a thread's or rank's share of the stream)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--distributed", f->learn.distributed,
                "run under mpirun; the same flags mean what they mean on one process: the defaults' search shares "
                "its candidates among the ranks (the model one process keeps), one pass in arrival order is the "
                "live learner's on rank 0, and one learner (--select off, nll, sep) has one shard per rank composed "
                "every round with MPI_Allreduce (in arrival order rank r learns the r-th --sync-every documents of "
                "every round; shuffled passes give each rank a random share); rank 0 writes --out");
  cmd->add_option("--search-documents", f->learn.search_documents,
                  "--select auto on a file: the candidates search on a sample of this many training documents, then "
                  "the kept setting learns the others once (0: search on all of them; cost grows with the file)")
      ->capture_default_str();
  cmd->add_option("--resume", f->learn.resume,
                  "continue this snapshot (its family, loss, options, schedule and step count) on --in");
  cmd->add_option("--in", f->in, "training stream (.pb, - for stdin)")->required();
  cmd->add_option("--out", f->out, "model snapshot to write")->required();
  return [cmd, f] {
    NoteScheduleGiven(*cmd, &f->learn);
    f->learn.threads_given = cmd->get_option("--threads")->count() > 0;
    if (f->learn.distributed) {
      if (int rc = ExecMpiProgram(); rc >= 0) return rc;
    }
    return RunOnInput(f->in, [&] { return RunTrain(f->learn, f->in, f->out); });
  };
}

}  // namespace tributary::cli
