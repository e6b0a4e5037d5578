// The `tributary` command-line program: convert, train, eval, predict,
// prequential, plugins. Script-facing names and flags are stable.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/crc.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli_common.h"
#include "serve.h"
#include "tributary/convert.h"
#include "tributary/metrics.h"
#include "tributary/sep_engine.h"
#include "tributary/trainer.h"

namespace tributary::cli {
namespace {

using json = nlohmann::json;

// A document source over one stream file that decodes into the model's id
// space, handling bad documents per --skip-bad and new classes.
class DecodedStream {
 public:
  static Result<std::unique_ptr<DecodedStream>> Open(const std::string& path, uint32_t max_frame, const Model& model) {
    auto r = DocumentReader::Open(path, max_frame);
    if (!r.ok()) return r.status();
    return Open(std::move(r).value(), model);
  }
  // Over a reader that has read the header and nothing else (standard input
  // cannot be opened twice: the reader that read the header must be reused).
  static Result<std::unique_ptr<DecodedStream>> Open(std::unique_ptr<DocumentReader> r, const Model& model) {
    auto d = DocumentDecoder::Create(model.schema(), r->header().schema());
    if (!d.ok()) return d.status().WithContext("stream '" + r->path() + "'");
    std::unique_ptr<DecodedStream> s(new DecodedStream(std::move(r), std::move(d).value()));
    return s;
  }
  // The first pass reuses `first` (the reader that read the header; needed
  // for standard input), later passes reopen the file.
  static Result<std::unique_ptr<DecodedStream>> OpenPass(std::unique_ptr<DocumentReader>* first,
                                                         const std::string& path, uint32_t max_frame,
                                                         const Model& model) {
    if (*first) return Open(std::move(*first), model);
    return Open(path, max_frame, model);
  }

  // Next decoded document. *eof at the end. Bad documents are skipped and
  // recorded when skip_bad, else returned as errors. New classes are added to
  // `model` when `learning` (open-classes schemas only); *grew is set then.
  Status Next(Model* model, bool learning, bool skip_bad, BadInput* bad, DocumentBuffer* out, bool* eof, bool* grew) {
    *grew = false;
    for (;;) {
      Status st = reader_->Next(&proto_, eof);
      if (!st.ok()) {
        if (skip_bad && reader_->last_error_recoverable()) {
          bad->Record(st);
          continue;
        }
        return st;
      }
      if (*eof) return Status::OK();
      std::string new_class;
      // A latent family's labels only name documents for evaluation: unknown
      // ones are added (to the schema only) at evaluation too.
      st = decoder_.Decode(proto_, reader_->documents_read() - 1, model->schema(), learning || model->latent_outputs(),
                           out, &new_class, &counters_);
      if (st.ok() && !new_class.empty()) {
        st = model->AddClass(new_class);
        if (st.ok()) {
          out->label = model->schema().ClassIndex(new_class);
          *grew = true;
        } else {
          st = st.WithContext(out->Name());
        }
      }
      if (!st.ok()) {
        if (skip_bad && st.IsInvalidDocument()) {
          bad->Record(st);
          continue;
        }
        return st.WithContext("'" + reader_->path() + "'");
      }
      return Status::OK();
    }
  }

  const DocumentReader& reader() const { return *reader_; }
  const DecodeCounters& counters() const { return counters_; }

 private:
  DecodedStream(std::unique_ptr<DocumentReader> r, DocumentDecoder d) : reader_(std::move(r)), decoder_(std::move(d)) {}
  std::unique_ptr<DocumentReader> reader_;
  DocumentDecoder decoder_;
  v1::Document proto_;
  DecodeCounters counters_;
};

void AddLearnFlags(CLI::App* app, LearnFlags* f) {
  app->add_option("--family", f->family, "family plugin: name or path to a .so")->capture_default_str();
  app->add_option("--loss", f->loss, "loss plugin: nll, ncll, hinge, or a path")->capture_default_str();
  app->add_option("--prior", f->prior, "family prior (multinomial: laplace, log, or a pseudo-count)");
  app->add_option("--opt", f->options, "family option key=value (repeatable)");
  app->add_option("--loss-opt", f->loss_options, "loss option key=value (repeatable; hinge: margin=M)");
  app->add_option("--topics", f->topics, "number of topics (family option 'topics': lda, lda-classifier, mmnb)");
  app->add_option("--components", f->components, "number of mixture components (family option 'components')");
  app->add_option("--schedule", f->schedule, "step sizes: inverse (1+lambda t)^-1, poly (tau0+t)^-kappa, constant")
      ->capture_default_str();
  app->add_option("--lambda", f->lambda, "lambda of the inverse schedule (default: the loss's own default)");
  app->add_option("--tau0", f->tau0, "tau0 of the poly schedule")->capture_default_str();
  app->add_option("--kappa", f->kappa, "kappa of the poly schedule")->capture_default_str();
  app->add_option("--rho", f->rho, "step size of the constant schedule")->capture_default_str();
  app->add_option("--n", f->n, "effective data-set size n (default: the stream length)");
  app->add_option("--seed", f->seed, "random seed (shuffling, family sampling)")->capture_default_str();
  app->add_flag("--skip-bad", f->skip_bad, "skip and count bad documents instead of stopping");
  app->add_option("--max-frame-bytes", f->max_frame_bytes, "largest accepted frame")->capture_default_str();
  app->add_flag("-q,--quiet", f->quiet, "no progress on stderr");
}

// n by default: the header's document_count, else a counting pass over the
// file (0 for standard input). A damaged stream fails here, before learning.
Result<uint64_t> StreamLength(const DocumentReader& r, const std::string& path, const LearnFlags& f) {
  if (f.n > 0 || r.header().document_count() > 0) return r.header().document_count();
  if (path == "-") return uint64_t{0};
  auto n = DocumentReader::CountDocuments(path, f.max_frame_bytes);
  if (!n.ok() && !(f.skip_bad && n.status().IsCorruption())) return n.status();
  return n.ok() ? *n : uint64_t{0};
}

void PrintBad(const BadInput& bad) {
  if (bad.skipped == 0) return;
  std::cerr << "tributary: skipped " << bad.skipped << " bad document(s)";
  for (const auto& m : bad.first_messages) std::cerr << "\n  " << m;
  if (bad.skipped > bad.first_messages.size()) std::cerr << "\n  ...";
  std::cerr << std::endl;
}

// Saves what was learned before a fatal error, so that nothing is lost.
void SavePartial(const Model& model, const std::string& out) {
  if (out.empty() || model.learner_state().updates == 0) return;
  std::string partial = out + ".partial";
  Status st = model.Save(partial);
  if (st.ok()) {
    std::cerr << "tributary: the model learned before the error (" << model.learner_state().updates
              << " updates) was saved to " << partial << std::endl;
  }
}

// ---- train -----------------------------------------------------------------

// The settings train's defaults try (trainer.h): the loss under a small grid
// of priors (and margins, for the hinge loss) wherever the user fixed none,
// and the generative NLL learner. Streaming keeps it to three learners.
std::vector<CandidateSpec> DefaultCandidates(const LearnFlags& f, bool streaming) {
  auto has_key = [](const std::vector<std::string>& kvs, const std::string& key) {
    return std::any_of(kvs.begin(), kvs.end(), [&](const std::string& kv) { return kv.rfind(key + "=", 0) == 0; });
  };
  const bool prior_fixed = !f.prior.empty() || has_key(f.options, "prior");
  const bool margin_search = f.loss == "hinge" && !has_key(f.loss_options, "margin");
  std::vector<std::string> priors = {""};
  if (!prior_fixed) priors = streaming ? std::vector<std::string>{"", "3"} : std::vector<std::string>{"", "3", "10"};
  std::vector<std::string> margins = {""};
  if (margin_search) margins = {"", "10"};
  std::vector<CandidateSpec> out;
  auto add = [&](const std::string& prior, const std::string& margin) {
    CandidateSpec c;
    c.loss = f.loss;
    c.label = f.loss;
    if (!prior.empty()) {
      c.family_options.emplace_back("prior", prior);
      c.label += " prior=" + prior;
    } else if (!prior_fixed) {
      c.label += " prior=default";
    }
    if (!margin.empty()) {
      c.loss_options.emplace_back("margin", margin);
      c.label += " margin=" + margin;
    } else if (margin_search) {
      c.label += " margin=1";
    }
    out.push_back(std::move(c));
  };
  if (streaming) {  // pairs, not the product: at most three learners in all
    for (size_t i = 0; i < std::max(priors.size(), margins.size()); ++i) {
      add(priors[std::min(i, priors.size() - 1)], margins[std::min(i, margins.size() - 1)]);
    }
  } else {
    for (const auto& p : priors)
      for (const auto& m : margins) add(p, m);
  }
  CandidateSpec nll;
  nll.loss = "nll";
  nll.label = "nll (generative)";
  nll.generative = true;
  out.push_back(std::move(nll));
  return out;
}

// train without tuning flags, for a discriminative loss: candidates chosen on
// the training stream (lib/include/tributary/trainer.h).
int RunTrainSelect(const LearnFlags& f, const std::string& in, const std::string& out,
                   std::unique_ptr<Model> schema_model, std::unique_ptr<DocumentReader> reader, uint64_t length) {
  const bool streaming = in == "-" || f.epochs == 1;
  const v1::StreamHeader header = reader->header();
  TrainerConfig cfg;
  cfg.candidates = DefaultCandidates(f, streaming);
  cfg.epochs = f.epochs;
  cfg.shuffle = !f.no_shuffle;
  cfg.seed = f.seed;
  cfg.threads = f.threads;
  cfg.search_documents = f.search_documents;
  BadInput bad;
  if (f.skip_bad) cfg.on_bad = [&bad](const Status& st) { bad.Record(st); };
  Model* classes_from = schema_model.get();
  ModelFactory factory = [&](const CandidateSpec& c) -> Result<std::unique_ptr<Model>> {
    LearnFlags g = f;
    g.loss = c.loss;
    if (c.generative) {
      g.lambda = -1;  // NLL's own default: exact averaging (batch MAP)
      g.loss_options.clear();
    }
    for (const auto& [k, v] : c.family_options) {
      if (k == "prior") g.prior = v;
    }
    for (const auto& [k, v] : c.loss_options) g.loss_options.push_back(k + "=" + v);
    auto m = NewModelFromFlags(g, Registry(), header, length);
    if (!m.ok()) return m.status();
    if (classes_from != nullptr) {
      for (const auto& name : classes_from->schema().classes()) {
        if ((*m)->schema().ClassIndex(name) < 0) TRIB_RETURN_IF_ERROR((*m)->AddClass(name));
      }
    }
    return m;
  };
  Progress progress("train", f.quiet);
  uint64_t steps = 0;
  auto start = std::chrono::steady_clock::now();
  TrainReport report;
  std::unique_ptr<Model> model;
  uint64_t documents = 0;
  DocumentBuffer doc;
  if (!streaming) {
    // Decode once into memory (labels as class indices of schema_model).
    DocumentSet docs;
    auto ds = DecodedStream::OpenPass(&reader, in, f.max_frame_bytes, *schema_model);
    if (!ds.ok()) return ReportError(ds.status());
    for (;;) {
      bool eof = false, grew = false;
      Status st = (*ds)->Next(schema_model.get(), true, f.skip_bad, &bad, &doc, &eof, &grew);
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
        return ReportError(st);
      }
      if (eof) break;
      docs.Add(doc);
    }
    documents = docs.size();
    if (docs.empty())
      return ReportError(Status::InvalidArgument("'" + in + "': no document was learned (empty stream?)"));
    auto r = Trainer::TrainOffline(factory, cfg, docs, &report, [&](uint64_t n) { progress.Tick(steps = n); });
    if (!r.ok()) return ReportError(r.status().WithContext("'" + in + "'"));
    model = std::move(r).value();
  } else {
    classes_from = nullptr;  // the trainer's first candidate decodes the stream
    auto tr = Trainer::Create(factory, cfg);
    if (!tr.ok()) return ReportError(tr.status());
    std::unique_ptr<Trainer> trainer = std::move(tr).value();
    auto ds = DecodedStream::OpenPass(&reader, in, f.max_frame_bytes, *trainer->schema_model());
    if (!ds.ok()) return ReportError(ds.status());
    auto fail = [&](const Status& st) {
      if (documents > 0) {
        auto r = trainer->Finish(&report);
        if (r.ok()) {
          (*r)->set_training_report(report.ToJson());
          SavePartial(**r, out);
        }
      }
      return ReportError(st);
    };
    for (;;) {
      bool eof = false, grew = false;
      Status st = (*ds)->Next(trainer->schema_model(), true, f.skip_bad, &bad, &doc, &eof, &grew);
      if (!st.ok()) return fail(st);
      if (eof) break;
      if (grew) {
        if (Status g = trainer->SyncClasses(); !g.ok()) return fail(g);
      }
      st = trainer->Learn(doc);
      if (!st.ok()) {
        if (f.skip_bad && (st.IsInvalidDocument() || st.code() == Status::Code::kNumeric)) {
          bad.Record(st);
          continue;
        }
        return fail(st.WithContext("'" + in + "'"));
      }
      progress.Tick(++documents);
    }
    if (documents == 0) {
      return ReportError(Status::InvalidArgument("'" + in + "': no document was learned (empty stream?)"));
    }
    auto r = trainer->Finish(&report);
    if (!r.ok()) return ReportError(r.status().WithContext("'" + in + "'"));
    model = std::move(r).value();
  }
  progress.Done(documents);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintBad(bad);
  model->learner_state().skipped_documents += bad.skipped;
  model->set_training_report(report.ToJson());
  Status st = model->Save(out);
  if (!st.ok()) return ReportError(st);
  if (!f.quiet) {
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
    std::cerr << line << "\ntrained " << model->family().name << "/" << model->loss_plugin()->name << " on "
              << documents << " documents (" << report.final_epochs << " pass(es) of the kept setting, "
              << report.document_updates << " updates while choosing) in " << Fmt(secs, 3) << " s -> " << out
              << std::endl;
  }
  return kExitOk;
}

int RunTrain(const LearnFlags& flags, const std::string& in, const std::string& out) {
  LearnFlags f = flags;
  const bool ep_family = f.engine != "sdem";
  // SEP / EP / ADF use no loss; the snapshot records nll (the posterior they
  // approximate is the likelihood's) whatever --loss says.
  if (ep_family) f.loss = "nll";
  auto first = DocumentReader::Open(in, f.max_frame_bytes);
  if (!first.ok()) return ReportError(first.status());
  auto length = StreamLength(**first, in, f);
  if (!length.ok()) return ReportError(length.status());
  std::unique_ptr<Model> model;
  if (!f.resume.empty()) {
    // Continue a snapshot with its own family, loss, options, schedule and
    // step counter (n too, unless --n is given): one learner, arrival order.
    if (ep_family) return ReportError(Status::InvalidArgument("--resume continues sdEM models only"));
    auto lr = Model::Load(f.resume, Registry());
    if (!lr.ok()) return ReportError(lr.status());
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
    auto mr = NewModelFromFlags(f, Registry(), (*first)->header(), *length);
    if (!mr.ok()) return ReportError(mr.status());
    model = std::move(mr).value();
  }
  std::unique_ptr<DocumentReader> reader = std::move(first).value();
  if (f.restarts > 1 && !ep_family) {
    return ReportError(
        Status::InvalidArgument("--restarts needs --engine sep, ep or adf (sdEM has no evidence to "
                                "choose a restart by)"));
  }
  if (f.epochs > 1 && in == "-" && !f.shuffle) {
    return ReportError(Status::InvalidArgument("--epochs > 1 needs a file (or --shuffle), not standard input"));
  }
  // Defaults that work: a discriminative loss on class outputs, with the
  // choice left to the program, goes through the Trainer.
  if (!ep_family && f.select == "auto" && !model->latent_outputs() && model->loss_plugin()->loss().requires_label) {
    return RunTrainSelect(f, in, out, std::move(model), std::move(reader), *length);
  }
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
    if (!engine.ok()) return ReportError(engine.status());
    for (uint32_t r = 0; r < f.restarts; ++r) {
      Replica rep;
      rep.seed = f.seed + r;
      if (r == 0) {
        rep.model = std::move(model);
      } else {
        LearnFlags fr = f;
        fr.seed = rep.seed;
        auto mr2 = NewModelFromFlags(fr, Registry(), reader->header(), *length);
        if (!mr2.ok()) return ReportError(mr2.status());
        rep.model = std::move(mr2).value();
      }
      LearnerOptions lo;
      lo.engine = f.engine;
      lo.effective_size = rep.model->learner_state().effective_size;
      lo.damping = f.damping;
      lo.seed = rep.seed;
      auto sl = Learner::Create(rep.model.get(), lo);
      if (!sl.ok()) return ReportError(sl.status());
      rep.learner = std::move(sl).value();
      replicas.push_back(std::move(rep));
    }
    model = std::move(replicas[0].model);
    learner = std::move(replicas[0].learner);
    if (f.restarts == 1) replicas.clear();
  } else {
    LearnerOptions lo;
    lo.engine = "sdem";
    lo.seed = f.seed;
    auto lr = Learner::Create(model.get(), lo);
    if (!lr.ok()) return ReportError(lr.status());
    learner = std::move(lr).value();
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
  BadInput bad;
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
  auto learn_one = [&](const DocumentBuffer& doc) -> Status {
    LearnResult outcome;
    Status st = learner->Learn(doc.View(), &outcome);
    if (st.ok() && !replicas.empty()) {
      // replicas[0]'s model and learner live in `model` / `learner` meanwhile.
      if (std::isfinite(outcome.log_z) && !outcome.skipped) {
        replicas[0].log_z += outcome.log_z;
        ++replicas[0].scored;
      }
      for (size_t r = 1; r < replicas.size(); ++r) {
        LearnResult o;
        Status rs = replicas[r].learner->Learn(doc.View(), &o);
        if (!rs.ok()) return rs.WithContext("restart with seed " + std::to_string(replicas[r].seed));
        if (std::isfinite(o.log_z) && !o.skipped) {
          replicas[r].log_z += o.log_z;
          ++replicas[r].scored;
        }
      }
    }
    if (!st.ok()) {
      if (f.skip_bad && (st.IsInvalidDocument() || st.code() == Status::Code::kNumeric)) {
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
    return ReportError(st);
  };
  auto start = std::chrono::steady_clock::now();
  DocumentBuffer doc;
  if (f.shuffle) {
    // Decode once into memory, then shuffle per epoch (Algorithm 1, line 0).
    std::vector<DocumentBuffer> docs;
    auto ds = DecodedStream::OpenPass(&reader, in, f.max_frame_bytes, *model);
    if (!ds.ok()) return ReportError(ds.status());
    for (;;) {
      bool eof = false, grew = false;
      Status st = (*ds)->Next(model.get(), true, f.skip_bad, &bad, &doc, &eof, &grew);
      if (!st.ok()) return fail(st);
      if (eof) break;
      if (grew) {
        if (Status g = renew(); !g.ok()) return fail(g);
      }
      docs.push_back(doc);
    }
    std::mt19937_64 rng(f.seed);
    for (uint32_t e = 0; e < f.epochs; ++e) {
      std::shuffle(docs.begin(), docs.end(), rng);
      for (const auto& d : docs) {
        Status st = learn_one(d);
        if (!st.ok()) return fail(st);
      }
      end_of_pass();
    }
  } else {
    for (uint32_t e = 0; e < f.epochs; ++e) {
      auto ds = DecodedStream::OpenPass(&reader, in, f.max_frame_bytes, *model);
      if (!ds.ok()) return fail(ds.status());
      for (;;) {
        bool eof = false, grew = false;
        Status st = (*ds)->Next(model.get(), true, f.skip_bad && e == 0, &bad, &doc, &eof, &grew);
        if (!st.ok()) {
          if (f.skip_bad && e > 0) continue;  // already reported in epoch 1
          return fail(st);
        }
        if (eof) break;
        if (grew) {
          if (Status g = renew(); !g.ok()) return fail(g);
        }
        st = learn_one(doc);
        if (!st.ok()) return fail(st);
      }
      end_of_pass();
    }
  }
  progress.Done(seen);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintBad(bad);
  if (seen == 0) {
    return ReportError(Status::InvalidArgument("'" + in + "': no document was learned (empty stream?)"));
  }
  const SepLearner* sep = learner->sep();
  if (sep && sep->counters().updates == 0) {
    // Every update was infeasible (e.g. SEP with --damping above 1/N
    // extrapolates each site by N * damping): the model is still the prior.
    std::string why = "every one of the " + std::to_string(sep->counters().skipped_infeasible) +
                      " updates would have left the feasible set and was skipped; the model is still the prior";
    if (f.engine == "sep" && sep->damping() * sep->effective_size() > 1.0) {
      why += " (--damping " + Fmt(sep->damping(), 6) + " > 1/N = " + Fmt(1.0 / sep->effective_size(), 6) +
             ": each site is applied " + Fmt(sep->damping() * sep->effective_size(), 4) +
             " times over; use a smaller --damping)";
    }
    return ReportError(Status::Numeric("'" + in + "': " + why));
  }
  Status st = model->Save(out);
  if (!st.ok()) return ReportError(st);
  if (!f.quiet && !restart_report.empty()) std::cerr << restart_report << std::endl;
  if (!f.quiet && sep) {
    const auto& c = sep->counters();
    std::cerr << "trained " << model->family().name << " by " << f.engine << " on " << seen << " documents ("
              << f.epochs << " pass(es), N = " << sep->effective_size() << ", damping " << sep->damping() << ", "
              << c.skipped_infeasible << " infeasible updates skipped, sum of log Z_i " << Fmt(c.log_evidence, 8)
              << (f.engine == "ep" ? ", " + std::to_string(sep->SiteBytes()) + " bytes of sites" : std::string())
              << ") in " << Fmt(secs, 3) << " s -> " << out << std::endl;
  } else if (!f.quiet) {
    const auto& ls = model->learner_state();
    std::cerr << "trained " << model->family().name << "/" << model->loss_plugin()->name << " on " << seen
              << " document updates (" << f.epochs << " epoch(s), " << ls.schedule.ToString()
              << ", n = " << ls.effective_size << ") in " << Fmt(secs, 3) << " s ("
              << Fmt(static_cast<double>(seen) / std::max(secs, 1e-9), 4) << " documents/s) -> " << out << std::endl;
  }
  return kExitOk;
}

// ---- eval --------------------------------------------------------------------

Status AddPosteriorSummary(const Model& m, json* j);

// Clustering quality and document-completion perplexity of a model whose
// outputs are latent components or topics (trib_family_vtable.outputs).
struct LatentEval {
  explicit LatentEval(const Model& m)
      : clusters(m.num_outputs(), static_cast<uint32_t>(m.schema().classes().size())),
        probs(m.num_outputs()),
        mass(m.num_outputs(), 0.0),
        sep(SepLearner::Supports(m.family())) {}
  Status Add(const Model& m, const trib_document& v, const double* scores, ScoringState* state) {
    log_px += Posterior(scores, m.num_outputs(), probs.data());
    for (uint32_t k = 0; k < m.num_outputs(); ++k) mass[k] += probs[k];
    clusters.Add(static_cast<uint32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin()), v.label);
    tokens += m.PerplexityTokens(v);
    if (sep) {
      // The approximate log evidence of the evaluated documents under the
      // posterior (SepLearner::LogPredictive: log E_q[p(x | theta)]).
      auto lz = SepLearner::LogPredictive(m, state, v);
      if (!lz.ok()) return lz.status();
      if (std::isfinite(lz.value())) {
        log_evidence += lz.value();
        ++evidence_documents;
      }
    }
    if (!m.has_completion()) return Status::OK();
    SplitForCompletion(v, &observed, &heldout);
    if (heldout.term_ids.empty() || observed.term_ids.empty()) return Status::OK();  // nothing to score
    double lp = 0;
    TRIB_RETURN_IF_ERROR(m.Completion(observed.View(), heldout.View(), state, &lp));
    completion_log_prob += lp;
    completion_tokens += heldout.TotalCount();
    return Status::OK();
  }
  double perplexity() const {
    if (completion_tokens > 0) return std::exp(-completion_log_prob / completion_tokens);
    return tokens > 0 ? std::exp(-log_px / tokens) : std::nan("");
  }
  ClusteringMetrics clusters;
  std::vector<double> probs, mass;
  double log_px = 0, tokens = 0, completion_log_prob = 0, completion_tokens = 0;
  const bool sep;  // the family has SEP hooks: approximate log evidence
  double log_evidence = 0;
  uint64_t evidence_documents = 0;  // documents whose log Z the family could estimate
  DocumentBuffer observed, heldout;
};

int RunEval(const std::string& model_path, const std::string& in, bool as_json, bool skip_bad, uint32_t max_frame) {
  auto mr = Model::Load(model_path, Registry());
  if (!mr.ok()) return ReportError(mr.status());
  auto model = std::move(mr).value();
  auto ds = DecodedStream::Open(in, max_frame, *model);
  if (!ds.ok()) return ReportError(ds.status());
  auto state = model->NewScoringState();
  if (!state.ok()) return ReportError(state.status());
  const bool latent = model->latent_outputs();
  ClassificationMetrics metrics(model->num_outputs());
  std::unique_ptr<LatentEval> lat;
  if (latent) lat = std::make_unique<LatentEval>(*model);
  std::vector<double> scores(model->num_outputs());
  BadInput bad;
  DocumentBuffer doc;
  for (;;) {
    bool eof = false, grew = false;
    Status st = (*ds)->Next(model.get(), false, skip_bad, &bad, &doc, &eof, &grew);
    if (!st.ok()) return ReportError(st);
    if (eof) break;
    trib_document v = doc.View();
    st = model->Score(v, state->get(), scores.data());
    if (st.ok() && latent) st = lat->Add(*model, v, scores.data(), state->get());
    if (!st.ok()) {
      st = st.WithContext(doc.Name());
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
  const auto& c = (*ds)->counters();
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
    if (Status st = AddPosteriorSummary(*model, &j); !st.ok()) return ReportError(st);
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

// ---- predict -------------------------------------------------------------------

// `predict` (classes and probabilities) and `infer` (topic / component
// proportions: softmax of a latent family's scores, see plugin_abi.h).
int RunPredict(const std::string& model_path, const std::string& in, const std::string& format, const std::string& out,
               bool skip_bad, uint32_t max_frame, bool infer) {
  if (format != "jsonl" && format != "pb") {
    return ReportError(Status::InvalidArgument("--format '" + format + "': expected jsonl or pb"));
  }
  auto mr = Model::Load(model_path, Registry());
  if (!mr.ok()) return ReportError(mr.status());
  auto model = std::move(mr).value();
  auto ds = DecodedStream::Open(in, max_frame, *model);
  if (!ds.ok()) return ReportError(ds.status());
  auto state = model->NewScoringState();
  if (!state.ok()) return ReportError(state.status());
  const uint32_t K = model->num_outputs();
  if (infer && !model->latent_outputs()) {
    return ReportError(Status::InvalidArgument("infer: family '" + model->family().name +
                                               "' has no latent components or topics (its outputs are the classes); "
                                               "use predict"));
  }
  std::vector<std::string> classes(K);
  for (uint32_t k = 0; k < K; ++k) classes[k] = model->OutputName(k);
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
    Status st = (*ds)->Next(model.get(), false, skip_bad, &bad, &doc, &eof, &grew);
    if (!st.ok()) return ReportError(st);
    if (eof) break;
    st = model->Score(doc.View(), state->get(), scores.data());
    if (!st.ok()) return ReportError(st.WithContext(doc.Name()));
    Posterior(scores.data(), K, probs.data());
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
    }
  }
  PrintBad(bad);
  if (writer) {
    Status st = writer->Close();
    if (!st.ok()) return ReportError(st);
  }
  text->flush();
  return kExitOk;
}

// ---- topics ------------------------------------------------------------------------

int RunTopics(const std::string& path, uint32_t top, bool as_json) {
  auto mr = Model::Load(path, Registry());
  if (!mr.ok()) return ReportError(mr.status());
  const Model& m = **mr;
  const auto& vocab = m.schema().vocabulary();
  json topics = json::array();
  std::vector<double> p;
  for (uint32_t k = 0; k < m.num_outputs(); ++k) {
    Status st = m.ComponentTerms(k, &p);
    if (!st.ok()) return ReportError(st);
    std::vector<uint32_t> ids(p.size());
    for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
    const size_t n = std::min<size_t>(top, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](uint32_t a, uint32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    json terms = json::array();
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = ids[i];
      terms.push_back({{"term", id < vocab.size() ? vocab[id] : "#" + std::to_string(id)}, {"id", id}, {"p", p[id]}});
    }
    topics.push_back({{"topic", k}, {"terms", terms}});
  }
  if (as_json) {
    std::cout << json{{"family", m.family().name}, {"topics", topics}}.dump() << std::endl;
    return kExitOk;
  }
  for (const auto& t : topics) {
    std::cout << "topic " << t["topic"].get<uint32_t>() << ":";
    for (const auto& term : t["terms"]) std::cout << ' ' << term["term"].get<std::string>();
    std::cout << '\n';
  }
  std::cout.flush();
  return kExitOk;
}

// ---- prequential ------------------------------------------------------------------

int RunPrequential(const LearnFlags& f, const std::string& in, uint64_t every, bool as_json, const std::string& out) {
  auto first = DocumentReader::Open(in, f.max_frame_bytes);
  if (!first.ok()) return ReportError(first.status());
  auto length = StreamLength(**first, in, f);
  if (!length.ok()) return ReportError(length.status());
  auto mr = NewModelFromFlags(f, Registry(), (*first)->header(), *length);
  if (!mr.ok()) return ReportError(mr.status());
  auto model = std::move(mr).value();
  if (model->latent_outputs()) {
    return ReportError(Status::InvalidArgument(
        "prequential measures classification accuracy, but family '" + model->family().name +
        "' learns latent components (labels are ignored); use train, then eval for clustering metrics"));
  }
  LearnerOptions lo;
  lo.engine = "sdem";
  lo.seed = f.seed;
  auto lr = Learner::Create(model.get(), lo);
  if (!lr.ok()) return ReportError(lr.status());
  auto learner = std::move(lr).value();
  auto ds = DecodedStream::Open(std::move(first).value(), *model);
  if (!ds.ok()) return ReportError(ds.status());
  // Progressive (test-then-train) accuracy, log-loss (NCLL, -log p(y | x))
  // and hinge loss (eq. 17, margin 1), cumulative and over the last window.
  ClassificationMetrics total(model->num_outputs()), window(model->num_outputs());
  json curve = json::array();
  BadInput bad;
  Progress progress("prequential", f.quiet || !as_json);
  DocumentBuffer doc;
  if (!as_json) std::cout << "documents\taccuracy\twindow_accuracy\tncll\twindow_ncll\thinge\twindow_hinge\n";
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
                << Fmt(win_ncll, 4) << '\t' << Fmt(hinge, 4) << '\t' << Fmt(win_hinge, 4) << '\n';
    }
    window = ClassificationMetrics(model->num_outputs());
  };
  for (;;) {
    bool eof = false, grew = false;
    Status st = (*ds)->Next(model.get(), true, f.skip_bad, &bad, &doc, &eof, &grew);
    if (!st.ok()) {
      SavePartial(*model, out);
      return ReportError(st);
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
      if (f.skip_bad && (st.IsInvalidDocument() || st.code() == Status::Code::kNumeric)) {
        bad.Record(st);
        continue;
      }
      SavePartial(*model, out);
      return ReportError(st);
    }
    total.Add(outcome.scores->data(), doc.label, model->PerplexityTokens(v));
    window.Add(outcome.scores->data(), doc.label, model->PerplexityTokens(v));
    progress.Tick(total.documents());
    if (every > 0 && total.documents() % every == 0) emit();
  }
  progress.Done(total.documents());
  if (window.documents() > 0 || curve.empty()) emit();
  PrintBad(bad);
  if (total.documents() == 0) return ReportError(Status::InvalidArgument("'" + in + "': no document in the stream"));
  if (!out.empty()) {
    Status st = model->Save(out);
    if (!st.ok()) return ReportError(st);
  }
  if (as_json) {
    json j;
    auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
    j["documents"] = total.documents();
    j["accuracy"] = num(total.accuracy());
    j["macro_f1"] = num(total.macro_f1());
    j["ncll"] = num(total.mean_ncll());
    j["hinge"] = num(total.mean_hinge());
    j["skipped"] = bad.skipped;
    j["curve"] = curve;
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << "prequential accuracy " << Fmt(total.accuracy(), 4) << " over " << total.documents() << " documents"
              << std::endl;
  }
  return kExitOk;
}

// ---- plugins ------------------------------------------------------------------------

int RunPlugins(bool as_json) {
  const auto& reg = Registry();
  if (as_json) {
    json j;
    j["search_path"] = reg.search_path();
    j["plugins"] = json::array();
    for (const auto& p : reg.plugins()) {
      j["plugins"].push_back({{"kind", KindName(p->kind)},
                              {"name", p->name},
                              {"version", p->version},
                              {"abi", std::to_string(p->abi_major) + "." + std::to_string(p->abi_minor)},
                              {"builtin", p->builtin},
                              {"path", p->path},
                              {"description", p->description}});
    }
    j["refused"] = json::array();
    for (const auto& r : reg.refused()) j["refused"].push_back({{"path", r.path}, {"reason", r.reason}});
    std::cout << j.dump(2) << std::endl;
    return kExitOk;
  }
  std::cout << "kind\tname\tversion\tabi\tpath\n";
  for (const auto& p : reg.plugins()) {
    std::cout << KindName(p->kind) << '\t' << p->name << '\t' << p->version << '\t' << p->abi_major << '.'
              << p->abi_minor << '\t' << p->path << (p->builtin ? " (built-in)" : "") << '\n';
  }
  for (const auto& r : reg.refused()) std::cout << "refused\t" << r.path << ": " << r.reason << '\n';
  std::cout.flush();
  return kExitOk;
}

// ---- posterior summary (SEP families) -----------------------------------------------

// Adds the family's summary (sep_abi.h `summary`) to `j`: model-wide vectors
// as j[name], per-component ones as j["components"][k][name].
Status AddPosteriorSummary(const Model& m, json* j) {
  struct Ctx {
    json* j;
  } ctx{j};
  auto visit = [](void* c, const char* name, uint32_t component, const double* values, size_t count) {
    json& out = *static_cast<Ctx*>(c)->j;
    json v = json::array();
    for (size_t i = 0; i < count; ++i) v.push_back(values[i]);
    if (component == UINT32_MAX) {
      out[name] = v;
    } else {
      json& comps = out["components"];
      if (!comps.is_array()) comps = json::array();
      while (comps.size() <= component) comps.push_back(json::object());
      comps[component][name] = v;
    }
  };
  auto r = SepLearner::Summary(m, visit, &ctx);
  return r.status();
}

// ---- inspect -------------------------------------------------------------------------

int RunInspect(const std::string& path, bool as_json) {
  auto mr = Model::Load(path, Registry());
  if (!mr.ok()) return ReportError(mr.status());
  const Model& m = **mr;
  // A digest of the statistics (raw values and each block's scale/shift):
  // equal digests mean bit-identical models.
  boost::crc_32_type crc;
  crc.process_bytes(m.stats().raw().data(), m.stats().raw().size() * sizeof(double));
  for (const auto& b : m.stats().blocks()) {
    crc.process_bytes(&b.scale, sizeof b.scale);
    crc.process_bytes(&b.shift, sizeof b.shift);
  }
  char digest[16];
  std::snprintf(digest, sizeof digest, "%08x", crc.checksum());
  const auto& ls = m.learner_state();
  json j;
  j["family"] = m.family().name;
  j["family_version"] = m.family().version;
  j["loss"] = m.loss_plugin() ? m.loss_plugin()->name : "";
  j["classes"] = m.schema().classes();
  j["vocabulary_size"] = m.schema().vocab_size();
  j["statistics"] = m.stats().size();
  j["updates"] = ls.updates;
  j["effective_size"] = ls.effective_size;
  j["schedule"] = ls.schedule.ToString();
  j["skipped_documents"] = ls.skipped_documents;
  j["wal_sequence"] = ls.wal_sequence;
  j["stats_digest"] = digest;
  json opts = json::object();
  for (const auto& [k, v] : m.family_options()) opts[k] = v;
  j["family_options"] = opts;
  json lopts = json::object();
  for (const auto& [k, v] : m.loss_options()) lopts[k] = v;
  j["loss_options"] = lopts;
  j["outputs"] = m.num_outputs();
  j["outputs_kind"] = m.latent_outputs() ? "latent" : "classes";
  // The posterior summary of families trained by SEP / EP / ADF (mixing
  // weights, per-component means and variances).
  if (Status st = AddPosteriorSummary(m, &j); !st.ok()) return ReportError(st);
  // How train's defaults chose the model (trainer.h).
  if (!m.training_report().empty()) {
    json tr = json::parse(m.training_report(), nullptr, false);
    if (!tr.is_discarded()) j["training"] = tr;
  }
  if (as_json) {
    std::cout << j.dump() << std::endl;
  } else {
    // Long vectors (a component's V shape means) are cut to their first
    // values in the text form; --json prints them whole.
    constexpr size_t kShow = 8;
    auto shorten = [](const json& v) {
      if (!v.is_array() || v.size() <= kShow) return v.dump();
      json head = json::array();
      for (size_t i = 0; i < kShow; ++i) head.push_back(v[i]);
      std::string d = head.dump();
      d.insert(d.size() - 1, ",... (" + std::to_string(v.size()) + " values; --json for all)");
      return d;
    };
    for (auto& [k, v] : j.items()) {
      if (k != "components") {
        std::cout << k << "\t" << shorten(v) << "\n";
        continue;
      }
      for (size_t c = 0; c < v.size(); ++c) {
        for (auto& [name, vec] : v[c].items())
          std::cout << "component " << c << " " << name << "\t" << shorten(vec) << "\n";
      }
    }
    std::cout.flush();
  }
  return kExitOk;
}

int RunConvert(const ConvertOptions& o, bool quiet) {
  ConvertReport report;
  Status st = ConvertFile(o, &report);
  if (!st.ok()) return ReportError(st);
  if (!quiet) {
    std::cerr << "converted " << report.documents << " documents (" << report.unlabelled << " unlabelled, "
              << report.skipped << " skipped, " << report.empty << " empty lines dropped), " << report.terms
              << " terms, " << report.classes << " classes -> " << o.out << std::endl;
  }
  return kExitOk;
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{"Tributary: online learning of probabilistic models from document streams (sdEM, SEP)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tributary 0.1.0");

  // convert
  ConvertOptions conv;
  bool conv_quiet = false;
  auto* c = app.add_subcommand("convert", "convert tsv or svmlight text to a document stream");
  c->add_option("--format", conv.format, "tsv or svmlight")->required()->check(CLI::IsMember({"tsv", "svmlight"}));
  c->add_option("--in", conv.in, "input text file")->required();
  c->add_option("--out", conv.out, "output stream (.pb)")->required();
  c->add_flag("--stop-words", conv.stop_words, "tsv: drop English stop words");
  c->add_option("--hashed-dim", conv.hashed_dim, "tsv: hash terms into this many ids instead of a vocabulary");
  c->add_option("--features", conv.features, "svmlight: counts (bag of words) or reals (dense features)")
      ->check(CLI::IsMember({"counts", "reals"}))
      ->capture_default_str();
  c->add_option("--dim", conv.dim, "svmlight reals: number of features (default: largest index in the file)");
  c->add_flag("--open-classes", conv.open_classes, "let unknown labels add classes during training");
  c->add_flag("--skip-bad", conv.skip_bad, "skip malformed lines instead of stopping");
  c->add_flag("-q,--quiet", conv_quiet, "no summary on stderr");

  // train
  LearnFlags tf;
  std::string t_in, t_out;
  auto* t = app.add_subcommand("train", "learn a model from a stream (sdEM, or SEP / EP / ADF with --engine)");
  AddLearnFlags(t, &tf);
  t->add_option("--engine", tf.engine, "sdem, or sep / ep / adf for families with SEP hooks (emsd-, edcm-mixture)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sdem", "sep", "ep", "adf"}));
  t->add_option(
       "--damping", tf.damping,
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
  t->add_option("--restarts", tf.restarts,
                "SEP/EP/ADF: learn with seeds seed .. seed + R - 1 side by side and keep the model whose documents "
                "had the highest approximate log evidence (sum of log Z_i)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  t->add_option("--restart-window", tf.restart_window,
                "documents after which the best restart is kept (default 0: the end of the first pass)")
      ->capture_default_str();
  t->add_option("--epochs", tf.epochs,
                "passes over the stream (EP: sweeps). Default: NCLL/hinge on a file choose it on a validation split "
                "of the training stream (early stopping, at most 20); otherwise 1")
      ->check(CLI::PositiveNumber);
  t->add_flag("--shuffle", tf.shuffle,
              "shuffle the documents (in memory) before each epoch (the default for several passes over a file)");
  t->add_flag("--no-shuffle", tf.no_shuffle, "keep the arrival order, even over several passes");
  t->add_option("--select", tf.select,
                "auto: NCLL/hinge try a few priors (and margins) and the generative NLL learner, and keep the "
                "best on held-out training documents (never the test split); off: one learner with the given "
                "settings")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "off"}));
  t->add_option("--threads", tf.threads,
                "--select auto on a file: candidates learn on this many threads (0: one per core); the model "
                "does not depend on it")
      ->capture_default_str();
  t->add_option("--search-documents", tf.search_documents,
                "--select auto on a file: the candidates search on a sample of this many training documents, then "
                "the kept setting learns the others once (0: search on all of them; cost grows with the file)")
      ->capture_default_str();
  t->add_option("--resume", tf.resume,
                "continue this snapshot (its family, loss, options, schedule and step count) on --in");
  t->add_option("--in", t_in, "training stream (.pb, - for stdin)")->required();
  t->add_option("--out", t_out, "model snapshot to write")->required();

  // eval
  std::string e_model, e_in;
  bool e_json = false, e_skip = false;
  uint32_t e_frame = kDefaultMaxFrameBytes;
  auto* e = app.add_subcommand("eval", "evaluate a model on a labelled stream");
  e->add_option("--model", e_model, "model snapshot")->required();
  e->add_option("--in", e_in, "test stream")->required();
  e->add_flag("--json", e_json, "one JSON object on stdout");
  e->add_flag("--skip-bad", e_skip, "skip and count bad documents");
  e->add_option("--max-frame-bytes", e_frame, "largest accepted frame");

  // predict
  std::string p_model, p_in, p_format = "jsonl", p_out;
  bool p_skip = false;
  uint32_t p_frame = kDefaultMaxFrameBytes;
  auto* p = app.add_subcommand("predict", "predicted class and probabilities per document");
  p->add_option("--model", p_model, "model snapshot")->required();
  p->add_option("--in", p_in, "document stream")->required();
  p->add_option("--format", p_format, "jsonl or pb")->capture_default_str();
  p->add_option("--out", p_out, "output file (default stdout)");
  p->add_flag("--skip-bad", p_skip, "skip and count bad documents");
  p->add_option("--max-frame-bytes", p_frame, "largest accepted frame");

  // infer
  std::string f_model, f_in, f_format = "jsonl", f_out;
  bool f_skip = false;
  uint32_t f_frame = kDefaultMaxFrameBytes;
  auto* inf = app.add_subcommand("infer", "topic / component proportions per document (latent families)");
  inf->add_option("--model", f_model, "model snapshot")->required();
  inf->add_option("--in", f_in, "document stream")->required();
  inf->add_option("--format", f_format, "jsonl or pb")->capture_default_str();
  inf->add_option("--out", f_out, "output file (default stdout)");
  inf->add_flag("--skip-bad", f_skip, "skip and count bad documents");
  inf->add_option("--max-frame-bytes", f_frame, "largest accepted frame");

  // topics
  std::string tp_model;
  uint32_t tp_top = 10;
  bool tp_json = false;
  auto* tp = app.add_subcommand("topics", "each topic's (component's) most probable terms");
  tp->add_option("--model", tp_model, "model snapshot")->required();
  tp->add_option("--top", tp_top, "terms per topic")->capture_default_str()->check(CLI::PositiveNumber);
  tp->add_flag("--json", tp_json, "JSON output");

  // prequential
  LearnFlags qf;
  std::string q_in, q_out;
  uint64_t q_every = 1000;
  bool q_json = false;
  auto* q = app.add_subcommand(
      "prequential", "test-then-train over one pass: accuracy, log-loss (NCLL) and hinge, cumulative and per window");
  AddLearnFlags(q, &qf);
  q->add_option("--in", q_in, "labelled stream")->required();
  q->add_option("--every", q_every, "report every K documents")->capture_default_str();
  q->add_flag("--json", q_json, "one JSON object on stdout");
  q->add_option("--out", q_out, "also save the final model here");

  // plugins
  bool pl_json = false;
  auto* pl = app.add_subcommand("plugins", "list the plugins found and the files refused");
  pl->add_flag("--json", pl_json, "JSON output");

  // inspect
  std::string i_model;
  bool i_json = false;
  auto* ins = app.add_subcommand("inspect", "summary of a model snapshot (family, classes, learner state, digest)");
  ins->add_option("--model", i_model, "model snapshot")->required();
  ins->add_flag("--json", i_json, "JSON output");

  // serve, client
  ServeFlags sf;
  ClientFlags cf;
  CLI::App* sv = nullptr;
  CLI::App* cl = nullptr;
  AddServeCommands(&app, &sf, &cf, &sv, &cl);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    return app.exit(err) == 0 ? kExitOk : kExitUsage;
  }
  if (*c) return RunConvert(conv, conv_quiet);
  for (auto& [cmd, flags] : {std::pair<CLI::App*, LearnFlags*>{t, &tf}, {q, &qf}, {sv, &sf.learn}}) {
    for (const char* opt : {"--schedule", "--lambda", "--tau0", "--kappa", "--rho"}) {
      if (const CLI::Option* o = cmd->get_option_no_throw(opt)) flags->schedule_given |= o->count() > 0;
    }
  }
  if (*t) return RunTrain(tf, t_in, t_out);
  if (*e) return RunEval(e_model, e_in, e_json, e_skip, e_frame);
  if (*p) return RunPredict(p_model, p_in, p_format, p_out, p_skip, p_frame, false);
  if (*inf) return RunPredict(f_model, f_in, f_format, f_out, f_skip, f_frame, true);
  if (*tp) return RunTopics(tp_model, tp_top, tp_json);
  if (*q) return RunPrequential(qf, q_in, q_every, q_json, q_out);
  if (*pl) return RunPlugins(pl_json);
  if (*ins) return RunInspect(i_model, i_json);
  if (*sv) return RunServe(sf);
  if (*cl) return RunClient(cf);
  return kExitUsage;
}

}  // namespace tributary::cli

int main(int argc, char** argv) {
  try {
    return tributary::cli::Main(argc, argv);
  } catch (const std::exception& ex) {
    std::cerr << "tributary: internal error: " << ex.what() << std::endl;
    return tributary::cli::kExitError;
  }
}
