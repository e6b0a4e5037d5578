// A training job with one learner over a stream file: the passes, their
// order, the threads, SEP / EP / ADF restarts, skipped documents and the
// engine's counters. What `tributary train` runs for `--select off`, `--loss
// nll`, `--engine sep|ep|adf` and `--resume`; the defaults' search is the
// Trainer's (trainer.h), one pass in arrival order the live learner's
// (live_learner.h), and MPI ranks are distributed.h's.
//
// Passes: in arrival order, each re-reading the file (standard input can be
// read once); shuffled (Algorithm 1, line 0 of the sdEM paper: "D is randomly
// shuffled"), the documents are decoded once into memory (a DocumentSet,
// fetched ahead in the shuffled order) and their order shuffled before each
// pass. Threads: each round's documents are split across threads and the
// shards composed (parallel.h). Restarts: replicas with seeds seed + 1, ...
// learn the same documents as the main model until the restart window
// closes; the one whose documents had the highest approximate log evidence
// (the sum of their log Z_i, each computed before the document was learned:
// log p(x_i | x_1..i-1) under the approximation) is kept.
//
// Thread safety: a job runs on the calling thread (and the threads it starts
// for `threads` > 1); the model is its own while it runs.
#ifndef TRIBUTARY_TRAINING_JOB_H_
#define TRIBUTARY_TRAINING_JOB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tributary/document_source.h"
#include "tributary/learner.h"
#include "tributary/model.h"
#include "tributary/sep_engine.h"
#include "tributary/status.h"
#include "tributary/stream_io.h"

namespace tributary {

/// How a one-learner job learns (the top of this file).
struct TrainingJobOptions {
  /// The engine and its settings (the engine resolved by learner.h
  /// ResolveEngine; seed; damping).
  /// effective_size 0: the model's learner_state().
  LearnerOptions learner;
  uint32_t epochs = 1;          ///< passes over the stream (EP: sweeps); >= 1
  bool shuffle = false;         ///< decode once into memory, shuffle before every pass
  uint32_t threads = 1;         ///< > 1: rounds split across threads (parallel.h)
  uint64_t sync_every = 0;      ///< threads: documents per thread and round (0: parallel.h's default)
  uint32_t restarts = 1;        ///< SEP / EP / ADF: learners side by side, the best kept
  uint64_t restart_window = 0;  ///< documents after which the best restart is kept (0: the first pass)
  /// Builds restart r's model (a fresh model like the caller's with `seed`);
  /// needed when restarts > 1.
  std::function<Result<std::unique_ptr<Model>>(uint64_t seed)> new_model;
  /// When true a document the model refuses (invalid, numerically bad) or a
  /// damaged frame that keeps the framing is recorded in the result and left
  /// out; otherwise it ends the job.
  bool skip_bad = false;
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;  ///< for the passes that reopen the file
  /// Called on the calling thread now and then with the documents learned so far.
  std::function<void(uint64_t documents)> on_progress;
  /// Called on the calling thread after each document learned (with threads:
  /// after each round), with the documents learned so far and the model as it
  /// stands (whole: it may be saved; during a restart window, the first
  /// restart's). Returning false ends the job there, as if the stream had
  /// ended: what the caller does on a stop signal; a live command also saves
  /// checkpoints from it. May be empty.
  std::function<bool(uint64_t documents, const Model& model)> after_document;
};

/// What a job did.
struct TrainingJobResult {
  uint64_t documents = 0;    ///< document updates over every pass (skipped ones not counted)
  SkippedDocuments skipped;  ///< left out under skip_bad (the first pass's)
  /// "restarts: kept seed S of R after D documents (sum of log Z_i: ...)", or empty.
  std::string restart_report;
  bool sep = false;           ///< an EP-family engine learned (the fields below are set)
  SepCounters counters;       ///< summed over the threads' shards
  double damping = 0;         ///< the engine's damping in use
  double effective_size = 0;  ///< its N
  size_t site_bytes = 0;      ///< EP: bytes of stored sites
  uint32_t threads = 1;       ///< threads that learned
};

/// Learns `path` (its header read by `*first`, which the first pass reuses;
/// "-" is standard input, which allows one pass unless shuffled) into
/// `*model` with one learner as `options` say. Errors: options out of range
/// or contradicting each other (InvalidArgument: restarts with sdEM or with
/// threads, several unshuffled passes over standard input); a refused
/// document or a damaged stream (naming it and the file) unless skip_bad; no
/// document learned; SEP whose every update was infeasible (Numeric, saying
/// why). On error `*model` holds what was learned before it (the caller may
/// keep it as a partial model) and `*result` what was done.
Status RunTrainingJob(const TrainingJobOptions& options, const std::string& path,
                      std::unique_ptr<DocumentReader>* first, std::unique_ptr<Model>* model, TrainingJobResult* result);

}  // namespace tributary

#endif  // TRIBUTARY_TRAINING_JOB_H_
