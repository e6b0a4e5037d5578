// `tributary train`: learn a model from a stream (sdEM, or SEP / EP / ADF),
// by default choosing among a few settings on the training stream.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_common.h"
#include "commands/commands.h"
#include "commands/train_distributed.h"
#include "live_output.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/parallel.h"
#include "tributary/sep_engine.h"
#include "tributary/trainer.h"
#include "tributary/training_job.h"

namespace tributary::cli {
namespace {

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
  const bool streaming = group == nullptr && (IsLiveInput(in) || f.epochs == 1);
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
  ConfigBuilder build = [&](const ModelConfig& c) { return NewModel(c, Registry(), stream_schema, length, in); };
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
          auto r = Trainer::TrainDefaults(*base, build, *schema_model, cfg, docs, &report);
          if (r.ok()) SavePartial(**r, out);
        }
        return refuse(st);
      }
      if (eof) break;
      docs.Add(doc);
    }
    documents = docs.size();
    if (docs.empty()) return refuse(Status::InvalidArgument("'" + in + "': no document was learned (empty stream?)"));
    auto r = Trainer::TrainDefaults(*base, build, *schema_model, cfg, docs, &report,
                                    [&](uint64_t n) { progress.Tick(steps = n); });
    if (!r.ok()) return refuse(r.status().WithContext("'" + in + "'"));
    model = std::move(r).value();
  } else {
    // (The trainer's first candidate decodes the stream.)
    auto tr = Trainer::Create(CandidateFactory(*base, build), cfg);
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
  // A stop signal ends the stream where it is; --out is saved now and then
  // meanwhile, the learner whole (live_output.h).
  Checkpoints checkpoints(f, in, out);
  for (;;) {
    if (StopSignals::Received()) break;
    bool eof = false, grew = false;
    Status st = (*ds)->Next(live->schema_model(), true, f.skip_bad ? &bad : nullptr, &doc, &eof, &grew);
    if (st.ok() && grew) st = live->SyncClasses();
    if (!st.ok() && StopSignals::Received()) break;  // the frame cut by the signal: the stream ends before it
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
    checkpoints.After(documents, save);
  }
  progress.Done(documents);
  PrintBad(bad);
  if (StopSignals::Received()) {
    if (documents == 0) return StoppedBeforeLearning("train");
    ReportStopped("train", documents, out);
  }
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
  const Engine engine = EngineFlag(f.engine);
  const bool ep_family = engine != Engine::kSdem;
  // SEP / EP / ADF use no loss; the snapshot records nll (the posterior they
  // approximate is the likelihood's) whatever --loss says (learner.h).
  if (auto fam = Registry().Find(f.family, TRIB_KIND_FAMILY); ep_family && fam.ok()) {
    f.loss = RecordedLoss(engine, **fam, f.loss);
  }
  // Every refusal names the training stream (cli_common.h NameFile), or the
  // file it is about (--resume, --out).
  auto refuse = [&in](const Status& st) { return ReportError(NameFile(st, in)); };
  // SIGINT / SIGTERM / SIGHUP end the stream where it is; what was learned
  // is saved to --out (live_output.h).
  StopSignals::Install(in);
  auto first = DocumentReader::Open(in, f.max_frame_bytes);
  if (!first.ok()) return StopSignals::Received() ? StoppedBeforeLearning("train") : refuse(first.status());
  StopSignals::Install(in);  // (a named FIFO's descriptor, now open)
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
  if (!ep_family && LiveLearnerApplies(SelectionFlag(f.select), Engine::kSdem, *model)) {
    const bool one_pass = (IsLiveInput(in) ? f.epochs <= 1 : f.epochs == 1) && !f.shuffle && !f.threads_given;
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
  if (f.epochs > 1 && IsLiveInput(in) && !f.shuffle) {
    return ReportError(Status::InvalidArgument("--epochs > 1 needs a file (or --shuffle), not a live input ('" + in +
                                               "': standard input or a FIFO)"));
  }
  if (mode == TrainMode::kLive) return RunTrainLive(f, in, out, std::move(reader), *length);
  if (mode == TrainMode::kSelect) return RunTrainSelect(f, in, out, std::move(model), std::move(reader), *length);
  if (f.epochs == 0) f.epochs = 1;
  // One learner with the given settings: the library's training job
  // (training_job.h). Several passes over a file are shuffled (scikit-learn's
  // SGD does the same); --no-shuffle keeps the arrival order.
  TrainingJobOptions job;
  job.learner.engine = ep_family ? engine : Engine::kSdem;
  job.learner.seed = f.seed;
  job.learner.damping = f.damping;
  job.epochs = f.epochs;
  job.shuffle = !f.no_shuffle && (f.shuffle || (f.epochs > 1 && !IsLiveInput(in)));
  job.threads = threads;
  job.sync_every = f.sync_every;
  job.restarts = f.restarts;
  job.restart_window = f.restart_window;
  job.new_model = [&](uint64_t seed) {
    LearnFlags fr = f;
    fr.seed = seed;
    return NewModelFromFlags(fr, Registry(), *reader, *length, in);
  };
  job.skip_bad = f.skip_bad;
  job.max_frame_bytes = f.max_frame_bytes;
  Progress progress("train", f.quiet);
  job.on_progress = [&progress](uint64_t n) { progress.Tick(n); };
  // A stop signal ends the job where it is; --out is saved now and then
  // meanwhile (live_output.h).
  Checkpoints checkpoints(f, in, out);
  job.after_document = [&](uint64_t documents, const Model& m) {
    checkpoints.After(documents, [&m](const std::string& path) { return m.Save(path); });
    return StopSignals::Received() == 0;
  };
  TrainingJobResult done;
  const auto start = std::chrono::steady_clock::now();
  Status st = RunTrainingJob(job, in, &reader, &model, &done);
  progress.Done(done.documents);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintBad(done.skipped);
  if (StopSignals::Received()) {
    // The frame cut by the signal is no error: the stream ended before it,
    // and what was learned goes to --out.
    if (done.documents == 0 || !model) return StoppedBeforeLearning("train");
    if (!st.ok()) std::cerr << "tributary train: (the stream was cut: " << st.ToString() << ")" << std::endl;
    st = Status::OK();
    ReportStopped("train", done.documents, out);
  }
  if (!st.ok()) {
    // Nothing is lost: what was learned before the error is kept.
    if (model && done.documents > 0 && !(done.sep && done.counters.updates == 0)) SavePartial(*model, out);
    return refuse(st);
  }
  st = model->Save(out);
  if (!st.ok()) return ReportError(NameFile(st, out));
  if (!f.quiet && !done.restart_report.empty()) std::cerr << done.restart_report << std::endl;
  const std::string on_threads = threads > 1 ? " on " + std::to_string(threads) + " threads" : std::string();
  if (!f.quiet && done.sep) {
    const SepCounters& c = done.counters;
    std::cerr << "trained " << model->family().name << " by " << f.engine << " on " << done.documents << " documents ("
              << f.epochs << " pass(es), N = " << done.effective_size << ", damping " << done.damping << ", "
              << c.skipped_infeasible << " infeasible updates skipped, "
              << (c.moves > 0 ? std::to_string(c.moves) + " structural move(s), " : std::string()) << "sum of log Z_i "
              << Fmt(c.log_evidence, 8)
              << (engine == Engine::kEp ? ", " + std::to_string(done.site_bytes) + " bytes of sites" : std::string())
              << ")" << on_threads << " in " << Fmt(secs, 3) << " s -> " << out << std::endl;
  } else if (!f.quiet) {
    const auto& ls = model->learner_state();
    std::cerr << "trained " << model->family().name << "/" << model->loss_plugin()->name << " on " << done.documents
              << " document updates (" << f.epochs << " epoch(s), " << ls.schedule.ToString()
              << ", n = " << ls.effective_size << ")" << on_threads << " in " << Fmt(secs, 3) << " s ("
              << Fmt(static_cast<double>(done.documents) / std::max(secs, 1e-9), 4) << " documents/s) -> " << out
              << std::endl;
  }
  return kExitOk;
}

}  // namespace

Runner SetUpTrain(CLI::App* cmd) {
  auto f = std::make_shared<TrainFlags>();
  AddLearnFlags(cmd, &f->learn);
  AddSaveFlags(cmd, &f->learn);
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
