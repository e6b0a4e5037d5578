// Pieces shared by the subcommands of the `tributary` program.
#ifndef TRIBUTARY_STREAMS_CLI_CLI_COMMON_H_
#define TRIBUTARY_STREAMS_CLI_CLI_COMMON_H_

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tributary/document.h"
#include "tributary/document_source.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/model.h"
#include "tributary/model_config.h"
#include "tributary/plugin_registry.h"
#include "tributary/sdem_learner.h"
#include "tributary/stream_io.h"

namespace tributary::cli {

// Exit codes of the program.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;  // bad input, bad model, failed plugin
constexpr int kExitUsage = 2;  // bad command line

// Prints "tributary: error: <status>" to stderr and returns kExitError.
// The engine an --engine flag names (its IsMember check admits only engine
// names, so it parses; learner.h ParseEngine).
inline Engine EngineFlag(const std::string& name) {
  const Result<Engine> e = ParseEngine(name);
  return e.ok() ? *e : Engine::kAuto;
}

// The selection a --select flag names (checked by its IsMember: auto | off).
inline Selection SelectionFlag(const std::string& name) { return name == "off" ? Selection::kOff : Selection::kAuto; }

int ReportError(const Status& st);

// The arguments `main` got (argv, null-terminated), kept for a command that
// runs the program again (train --distributed, commands/train_distributed.h);
// null before SetProgramArguments.
void SetProgramArguments(char** argv);
char** ProgramArguments();

// `st` naming the file it is about (Status::WithFile). Every refusal of a command that reads
// a file names the file (and the document, where one is involved): through
// this, or in its own words.
Status NameFile(const Status& st, const std::string& path);

// Runs a command whose input is `path`: an exception that escapes `run`
// (std::bad_alloc when a damaged input asks for more memory than there is) is
// reported naming the input, never as a bare internal error.
int RunOnInput(const std::string& path, const std::function<int()>& run);

// Progress on stderr, only when stderr is a terminal and not --quiet.
class Progress {
 public:
  Progress(std::string label, bool quiet);
  void Tick(uint64_t documents);
  void Done(uint64_t documents);

 private:
  std::string label_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_, last_;
};

// Options shared by `train` and `prequential`.
struct LearnFlags {
  std::string family = "multinomial";
  std::string loss = "ncll";
  std::string prior;                      // family option "prior" when set
  std::vector<std::string> options;       // "key=value" family options
  std::vector<std::string> loss_options;  // "key=value" loss options
  uint32_t topics = 0;                    // family option "topics" when > 0
  uint32_t components = 0;                // family option "components" when > 0
  std::string schedule = "inverse";       // inverse | poly | constant
  bool schedule_given = false;            // --schedule/--lambda/--tau0/--kappa/--rho given
  double lambda = -1;                     // < 0: the loss's default
  double tau0 = 1.0, kappa = 0.7, rho = 0.01;
  std::string engine = "sdem";  // sdem | sep | ep | adf
  double damping = 0;           // SEP eps / EP delta; 0: the engine's default
  uint32_t restarts = 1;        // SEP/EP/ADF: models with seeds seed .. seed + restarts - 1
  uint64_t restart_window = 0;  // documents before keeping the best restart; 0: the first pass
  uint32_t epochs = 0;          // 0: not given (train: chosen by validation; else 1)
  double n = 0;                 // 0: the stream length
  bool shuffle = false;
  bool no_shuffle = false;            // train: keep arrival order even over several passes
  std::string select = "auto";        // train: auto (candidates chosen on the training stream) | off
  std::string resume;                 // train: continue this snapshot
  uint32_t threads = 0;               // train --select auto on a file: candidates in parallel (0: all cores);
                                      // one learner: documents split across threads when given
  bool threads_given = false;         // --threads given
  uint64_t sync_every = 0;            // one learner on threads / ranks: documents per shard and round (0: default)
  bool distributed = false;           // train --distributed: one shard per MPI rank
  uint64_t search_documents = 20000;  // train --select auto on a file: the search's sample (0: all)
  uint64_t seed = 1;
  bool skip_bad = false;
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  bool quiet = false;
  uint64_t save_every = 0;    // --save-every: documents between saves of --out while learning (0: not by count)
  double save_interval = -1;  // --save-interval: seconds between them (0: at the end only; < 0: live_output.h)
};

// True when `in` is a live input: standard input ("-") or a path that is not
// a regular file (a FIFO, a terminal, a socket). It can be read once, has no
// length to count in advance, and may never end (live_output.h).
bool IsLiveInput(const std::string& in);

// Adds the options of LearnFlags that `train` and `prequential` share to
// `app`, bound to `f`.
void AddLearnFlags(CLI::App* app, LearnFlags* f);

// Adds --schedule, --lambda, --tau0, --kappa and --rho (part of
// AddLearnFlags; `serve` takes them alone).
void AddScheduleFlags(CLI::App* app, LearnFlags* f);

// Sets f->schedule_given when `cmd` (parsed) was given any of --schedule,
// --lambda, --tau0, --kappa or --rho that it has.
void NoteScheduleGiven(const CLI::App& cmd, LearnFlags* f);

// The settings of a fresh model (model_config.h) from the flags; errors name
// the flag (a malformed --opt).
Result<ModelConfig> ConfigFromFlags(const LearnFlags& flags);

// Builds a fresh model for the stream `header` (of the file `source`) from
// the flags (ConfigFromFlags, then NewModel: the library's defaults). Errors
// of the flags alone (an unknown plugin, a malformed --opt) name the flag or
// the plugin; the others (the schema, a plugin refusing the schema or an
// option) name `source` too.
Result<std::unique_ptr<Model>> NewModelFromFlags(const LearnFlags& flags, const PluginRegistry& registry,
                                                 const v1::StreamHeader& header, uint64_t stream_documents,
                                                 const std::string& source);
// The same for the stream `reader` reads: the model is made from
// reader.schema() and shares its vocabulary (no term copied).
Result<std::unique_ptr<Model>> NewModelFromFlags(const LearnFlags& flags, const PluginRegistry& registry,
                                                 const DocumentReader& reader, uint64_t stream_documents,
                                                 const std::string& source);

// n by default: the header's document_count, else a counting pass over the
// file (0 for standard input). A damaged stream fails here, before learning.
// The check of an explicit --n: a finite effective data-set size in
// [1, kMaxEffectiveSize] (NaN, 0, negative and infinite values are refused,
// not replaced by the default).
CLI::Validator EffectiveSizeCheck();

Result<uint64_t> StreamLength(const DocumentReader& r, const std::string& path, const LearnFlags& f);

// Counters of bad documents met while reading a stream.
// The documents --skip-bad left out (the library's SkippedDocuments).
using BadInput = SkippedDocuments;

// Prints the count and first messages of the skipped bad documents to
// stderr; nothing when none was skipped.
void PrintBad(const BadInput& bad);

// Saves what was learned before a fatal error to <out>.partial, so that
// nothing is lost; nothing when `out` is empty or the model has no update.
void SavePartial(const Model& model, const std::string& out);

// A scanned registry over the default search path.
const PluginRegistry& Registry();

// Formats a double for text output (NaN as "nan").
std::string Fmt(double x, int precision = 6);

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_CLI_COMMON_H_
