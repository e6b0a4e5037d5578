#include "cli_common.h"

#include <sys/stat.h>
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

Status NameFile(const Status& st, const std::string& path) { return st.WithFile(path); }

namespace {
char** program_arguments = nullptr;
}  // namespace

void SetProgramArguments(char** argv) { program_arguments = argv; }
char** ProgramArguments() { return program_arguments; }

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
  app->add_option("--topics", f->topics,
                  "number of topics (family option 'topics': lda, slda, lgda, lda-classifier, mmnb)");
  app->add_option("--components", f->components, "number of mixture components (family option 'components')");
  AddScheduleFlags(app, f);
  app->add_option("--n", f->n,
                  "effective data-set size n (default: the stream length; 10000 for a live stream of unknown length)")
      ->check(EffectiveSizeCheck());
  app->add_option("--seed", f->seed, "random seed (shuffling, family sampling)")->capture_default_str();
  app->add_flag("--skip-bad", f->skip_bad, "skip and count bad documents instead of stopping");
  app->add_option("--max-frame-bytes", f->max_frame_bytes, "largest accepted frame")->capture_default_str();
  app->add_flag("-q,--quiet", f->quiet, "no progress on stderr");
}

void AddScheduleFlags(CLI::App* app, LearnFlags* f) {
  app->add_option("--schedule", f->schedule, "step sizes: inverse (1+lambda t)^-1, poly (tau0+t)^-kappa, constant")
      ->capture_default_str();
  app->add_option("--lambda", f->lambda, "lambda of the inverse schedule (default: the loss's own default)");
  app->add_option("--tau0", f->tau0, "tau0 of the poly schedule")->capture_default_str();
  app->add_option("--kappa", f->kappa, "kappa of the poly schedule")->capture_default_str();
  app->add_option("--rho", f->rho, "step size of the constant schedule")->capture_default_str();
}

void NoteScheduleGiven(const CLI::App& cmd, LearnFlags* f) {
  for (const char* opt : {"--schedule", "--lambda", "--tau0", "--kappa", "--rho"}) {
    if (const CLI::Option* o = cmd.get_option_no_throw(opt)) f->schedule_given |= o->count() > 0;
  }
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
  return PluginRegistry::Default();
}

std::string Fmt(double x, int precision) {
  if (std::isnan(x)) return "nan";
  std::ostringstream os;
  os.precision(precision);
  os << x;
  return os.str();
}

Result<ModelConfig> ConfigFromFlags(const LearnFlags& f) {
  ModelConfig c;
  c.family = f.family;
  c.loss = f.loss;
  if (!f.prior.empty()) c.family_options.emplace_back("prior", f.prior);
  if (f.topics > 0) c.family_options.emplace_back("topics", std::to_string(f.topics));
  if (f.components > 0) c.family_options.emplace_back("components", std::to_string(f.components));
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
  TRIB_RETURN_IF_ERROR(parse(f.options, "--opt", &c.family_options));
  TRIB_RETURN_IF_ERROR(parse(f.loss_options, "--loss-opt", &c.loss_options));
  auto kind = ParseScheduleKind(f.schedule);
  if (!kind.ok()) return kind.status();
  c.schedule = *kind;
  c.schedule_given = f.schedule_given;
  c.lambda = f.lambda;
  c.tau0 = f.tau0;
  c.kappa = f.kappa;
  c.rho = f.rho;
  c.n = f.n;
  c.seed = f.seed;
  return c;
}

Result<std::unique_ptr<Model>> NewModelFromFlags(const LearnFlags& f, const PluginRegistry& registry,
                                                 const v1::StreamHeader& header, uint64_t stream_documents,
                                                 const std::string& source) {
  auto c = ConfigFromFlags(f);
  if (!c.ok()) return c.status();
  return NewModel(*c, registry, header.schema(), stream_documents, source);
}

Result<std::unique_ptr<Model>> NewModelFromFlags(const LearnFlags& f, const PluginRegistry& registry,
                                                 const DocumentReader& reader, uint64_t stream_documents,
                                                 const std::string& source) {
  auto c = ConfigFromFlags(f);
  if (!c.ok()) return c.status();
  return NewModel(*c, registry, reader.schema(), stream_documents, source);
}

CLI::Validator EffectiveSizeCheck() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(value, v) || !(v >= 1 && v <= kMaxEffectiveSize)) {
          return "expected a finite effective data-set size n in [1, 1e12], found " + value;
        }
        return std::string();
      },
      "N in [1, 1e12]");
}

bool IsLiveInput(const std::string& in) {
  if (in == "-") return true;
  struct stat st;
  return ::stat(in.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

Result<uint64_t> StreamLength(const DocumentReader& r, const std::string& path, const LearnFlags& f) {
  if (f.n > 0 || r.fields().document_count() > 0) return r.fields().document_count();
  if (IsLiveInput(path)) return uint64_t{0};  // (counting would read it up)
  auto n = DocumentReader::CountDocuments(path, f.max_frame_bytes);
  if (!n.ok() && !(f.skip_bad && n.status().IsCorruption())) return n.status();
  return n.ok() ? *n : uint64_t{0};
}

}  // namespace tributary::cli
