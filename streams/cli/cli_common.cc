#include "cli_common.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <sstream>

namespace tributary::cli {

int ReportError(const Status& st) {
  std::cerr << "tributary: error: " << st.ToString() << std::endl;
  return kExitError;
}

Status NameFile(const Status& st, const std::string& path) {
  if (st.ok() || st.message().find("'" + path + "'") != std::string::npos) return st;
  return st.WithContext("'" + path + "'");
}

int RunOnInput(const std::string& path, const std::function<int()>& run) {
  try {
    return run();
  } catch (const std::bad_alloc&) {
    // The input asked for it (a damaged header's sizes, say): it is named.
    return ReportError(
        Status::InvalidArgument("'" + path + "': out of memory while reading or learning from it (std::bad_alloc)"));
  } catch (const std::exception& ex) {
    return ReportError(Status::Internal("'" + path + "': unexpected failure while reading or learning from it (" +
                                        std::string(ex.what()) + ")"));
  }
}

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)),
      enabled_(!quiet && ::isatty(2)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::Tick(uint64_t documents) {
  if (!enabled_ || (documents & 1023) != 0) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(250)) return;
  last_ = now;
  double secs = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r[%s] %llu documents, %.0f documents/s   ", label_.c_str(),
               static_cast<unsigned long long>(documents), secs > 0 ? static_cast<double>(documents) / secs : 0.0);
  std::fflush(stderr);
}

void Progress::Done(uint64_t documents) {
  if (!enabled_) return;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r[%s] %llu documents in %.2f s (%.0f documents/s)\n", label_.c_str(),
               static_cast<unsigned long long>(documents), secs,
               secs > 0 ? static_cast<double>(documents) / secs : 0.0);
}

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
  app->add_option("--n", f->n, "effective data-set size n (default: the stream length; 10000 for a live stream of unknown length)");
  app->add_option("--seed", f->seed, "random seed (shuffling, family sampling)")->capture_default_str();
  app->add_flag("--skip-bad", f->skip_bad, "skip and count bad documents instead of stopping");
  app->add_option("--max-frame-bytes", f->max_frame_bytes, "largest accepted frame")->capture_default_str();
  app->add_flag("-q,--quiet", f->quiet, "no progress on stderr");
}

void NoteScheduleGiven(const CLI::App& cmd, LearnFlags* f) {
  for (const char* opt : {"--schedule", "--lambda", "--tau0", "--kappa", "--rho"}) {
    if (const CLI::Option* o = cmd.get_option_no_throw(opt)) f->schedule_given |= o->count() > 0;
  }
}

void BadInput::Record(const Status& st) {
  ++skipped;
  if (first_messages.size() < 5) first_messages.push_back(st.message());
}

void PrintBad(const BadInput& bad) {
  if (bad.skipped == 0) return;
  std::cerr << "tributary: skipped " << bad.skipped << " bad document(s)";
  for (const auto& m : bad.first_messages) std::cerr << "\n  " << m;
  if (bad.skipped > bad.first_messages.size()) std::cerr << "\n  ...";
  std::cerr << std::endl;
}

void SavePartial(const Model& model, const std::string& out) {
  if (out.empty() || model.learner_state().updates == 0) return;
  std::string partial = out + ".partial";
  Status st = model.Save(partial);
  if (st.ok()) {
    std::cerr << "tributary: the model learned before the error (" << model.learner_state().updates
              << " updates) was saved to " << partial << std::endl;
  }
}

const PluginRegistry& Registry() {
  // Lazy: a command loads only the plugins it names (plugin_registry.h);
  // `tributary plugins` loads them all.
  static PluginRegistry* reg = new PluginRegistry();
  return *reg;
}

std::string Fmt(double x, int precision) {
  if (std::isnan(x)) return "nan";
  std::ostringstream os;
  os.precision(precision);
  os << x;
  return os.str();
}

Result<std::unique_ptr<Model>> NewModelFromFlags(const LearnFlags& f, const PluginRegistry& registry,
                                                 const v1::StreamHeader& header, uint64_t stream_documents,
                                                 const std::string& source) {
  // The flags alone first: their errors name the flag or the plugin.
  auto fam = registry.Find(f.family, TRIB_KIND_FAMILY);
  if (!fam.ok()) return fam.status();
  auto loss = registry.Find(f.loss, TRIB_KIND_LOSS);
  if (!loss.ok()) return loss.status();
  Options opts;
  if (!f.prior.empty()) opts.emplace_back("prior", f.prior);
  if (f.topics > 0) opts.emplace_back("topics", std::to_string(f.topics));
  if (f.components > 0) opts.emplace_back("components", std::to_string(f.components));
  auto parse = [](const std::vector<std::string>& kvs, const char* flag, Options* out) {
    for (const auto& kv : kvs) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        return Status::InvalidArgument(std::string(flag) + " '" + kv + "': expected key=value");
      }
      out->emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return Status::OK();
  };
  TRIB_RETURN_IF_ERROR(parse(f.options, "--opt", &opts));
  Options loss_opts;
  TRIB_RETURN_IF_ERROR(parse(f.loss_options, "--loss-opt", &loss_opts));
  StepSchedule::Kind schedule_kind;
  if (f.schedule == "inverse") {
    schedule_kind = StepSchedule::Kind::kInverseLinear;
  } else if (f.schedule == "poly") {
    schedule_kind = StepSchedule::Kind::kPolynomial;
  } else if (f.schedule == "constant") {
    schedule_kind = StepSchedule::Kind::kConstant;
  } else {
    return Status::InvalidArgument("--schedule '" + f.schedule + "': expected inverse, poly or constant");
  }
  // Then the model for the stream's schema: a refusal may be the schema's
  // (or the header's length) as well as an option's, so it names the stream.
  auto in_source = [&source](const Status& st) { return NameFile(st, source); };
  auto schema = ModelSchema::FromProto(header.schema());
  if (!schema.ok()) return in_source(schema.status());
  auto model = Model::Create(*fam, nullptr, std::move(schema).value(), std::move(opts), f.seed);
  if (!model.ok()) return in_source(model.status());
  if (Status st = (*model)->SetLoss(*loss, std::move(loss_opts)); !st.ok()) return in_source(st);
  (*model)->learner_state().schedule.lambda = (*loss)->loss().default_lambda;
  LearnerState& ls = (*model)->learner_state();
  ls.schedule.kind = schedule_kind;
  if (f.lambda >= 0) ls.schedule.lambda = f.lambda;
  ls.schedule.tau0 = f.tau0;
  ls.schedule.kappa = f.kappa;
  ls.schedule.rho = f.rho;
  if ((*model)->latent_outputs() && !f.schedule_given) {
    // A latent family starts from a random, symmetry-breaking initialisation
    // that rho_0 = 1 would overwrite with the first document's statistics:
    // default to a forgetting schedule that starts below 1 (online EM,
    // Cappe & Moulines 2009; Hoffman et al. 2010 use the same form).
    ls.schedule.kind = StepSchedule::Kind::kPolynomial;
    ls.schedule.tau0 = kLatentTau0;
    ls.schedule.kappa = kLatentKappa;
  }
  TRIB_RETURN_IF_ERROR(ls.schedule.Validate());
  if (f.n > 0) {
    ls.effective_size = f.n;
  } else if (stream_documents > 0) {
    ls.effective_size = static_cast<double>(stream_documents);
  } else {
    ls.effective_size = kLiveDefaultN;  // a live stream: its length is unknown
  }
  // Families that derive theta from n (e.g. LDA's lambda = n mu) see the
  // configured n before the first document.
  if (Status st = (*model)->Rebuild(trib_step{0.0, ls.effective_size, 0.0, 0}); !st.ok()) return in_source(st);
  return model;
}

Result<uint64_t> StreamLength(const DocumentReader& r, const std::string& path, const LearnFlags& f) {
  if (f.n > 0 || r.header().document_count() > 0) return r.header().document_count();
  if (path == "-") return uint64_t{0};
  auto n = DocumentReader::CountDocuments(path, f.max_frame_bytes);
  if (!n.ok() && !(f.skip_bad && n.status().IsCorruption())) return n.status();
  return n.ok() ? *n : uint64_t{0};
}

}  // namespace tributary::cli
