// A live command's output kept while the stream has no end (issue 42 item 6):
// the stop signals end the stream where it is, and the model is saved now
// and then while it is learned.
//
// `prequential` and `train` read a stream that may never end (`tail -F log |
// tributary convert ... | tributary prequential --in - --out live.trib`).
// Their model used to be written only at the end of the stream, so Ctrl-C
// lost it. Now:
//   - On a live input (standard input, a FIFO: IsLiveInput), SIGINT, SIGTERM
//     and SIGHUP end the stream: the command finishes as if
//     the input had ended after the last whole document (its report, the
//     per-class sample learned, --out saved atomically), then exits 0. A
//     second signal ends the process at once (the file at --out is then the
//     last complete save: saves are atomic).
//   - --save-every N / --save-interval S save --out every N documents / S
//     seconds while the stream is learned (a live input: every 300 s unless
//     told otherwise), atomically, so kill -9 or a power cut loses at most
//     that much learning.
#ifndef TRIBUTARY_STREAMS_CLI_LIVE_OUTPUT_H_
#define TRIBUTARY_STREAMS_CLI_LIVE_OUTPUT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "cli_common.h"
#include "tributary/status.h"

namespace tributary::cli {

// The stop signals of a command reading `in` ("-": standard input).
//
// How a blocked read ends: the handler (installed with SA_RESTART) puts
// /dev/null in the input's place with dup2, which is async-signal-safe; the
// interrupted read() restarts on the same descriptor number, now /dev/null,
// and returns end-of-file, as does every later read. A regular file never
// blocks: the commands poll Received() between documents. A signal whose
// disposition was "ignore" when the program started (nohup, a background
// job of a script) stays ignored. SA_RESETHAND: the second signal has its
// default effect (the process ends).
class StopSignals {
 public:
  // Installs the handlers for SIGINT, SIGTERM and SIGHUP when `in` is a live
  // input (IsLiveInput; a file ends by itself, and a signal keeps its default
  // effect: the process ends, --out untouched). Call before opening the input
  // (its header may block) and again once it is open (a named FIFO's
  // descriptor is found by its device and inode).
  static void Install(const std::string& in);
  // 0, or the first stop signal received.
  static int Received();
  // "SIGINT", "SIGTERM", "SIGHUP" (or "signal N").
  static std::string Name(int sig);
};

// Adds --save-every and --save-interval (LearnFlags::save_every,
// save_interval) to `cmd`.
void AddSaveFlags(CLI::App* cmd, LearnFlags* flags);

// Saves a live command's --out now and then. `save` writes the model
// (atomically, as Model::Save and LiveLearner::Save do).
class Checkpoints {
 public:
  // `in` decides the default interval: a live input (standard input, a FIFO,
  // a terminal, a socket) is saved every kDefaultLiveInterval seconds unless
  // --save-interval says otherwise; a regular file only at the end.
  static constexpr double kDefaultLiveInterval = 300;
  Checkpoints(const LearnFlags& flags, const std::string& in, std::string out);

  // After each document learned (`documents` so far): saves when one is
  // due and at least one document was learned since the last save. A save
  // that fails is reported on stderr (once per run of failures) and tried
  // again at the next due point: the stream goes on.
  void After(uint64_t documents, const std::function<Status(const std::string& path)>& save);

  uint64_t saves() const { return saves_; }
  double interval() const { return interval_; }

 private:
  std::string out_;
  uint64_t every_ = 0;
  double interval_ = 0;
  uint64_t last_documents_ = 0;
  std::chrono::steady_clock::time_point last_time_;
  uint64_t saves_ = 0;
  bool failing_ = false;
};

// The line a command prints on stderr when a stop signal ended its stream.
void ReportStopped(const std::string& command, uint64_t documents, const std::string& out);

// A stop signal came before any document was learned: says so on stderr;
// returns the exit code (0: the user ended the stream; nothing to save).
int StoppedBeforeLearning(const std::string& command);

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_LIVE_OUTPUT_H_
