// `tributary train --distributed` (commands/train_distributed.cc).
#ifndef TRIBUTARY_STREAMS_CLI_COMMANDS_TRAIN_DISTRIBUTED_H_
#define TRIBUTARY_STREAMS_CLI_COMMANDS_TRAIN_DISTRIBUTED_H_

#include <memory>
#include <string>

#include "cli_common.h"
#include "tributary/model.h"
#include "tributary/stream_io.h"
#include "tributary/trainer.h"

namespace tributary::cli {

// What `train` runs for the flags given, on one process, threads or ranks
// alike (the same flags give the same defaults: train.cc RunTrain).
enum class TrainMode {
  kOneLearner,  // --select off, nll, SEP/EP/ADF, --resume: one learner with the given settings
  kSelect,      // the defaults' search over candidates (trainer.h, offline)
  kLive,        // one pass in arrival order: the live learner (live_learner.h)
};

// The defaults' search (trainer.h) over `in` into `out`. `schema_model`
// decodes the stream; `length` is the stream's n. With `group` (the MPI
// ranks) the candidates are shared among its members and rank 0 alone writes
// `out` and reports; every member returns the same model. Returns the exit
// code.
int RunTrainSelect(const LearnFlags& f, const std::string& in, const std::string& out,
                   std::unique_ptr<Model> schema_model, std::unique_ptr<DocumentReader> reader, uint64_t length,
                   const TrainerGroup* group = nullptr);
// One pass in arrival order by the live learner (live_learner.h) into `out`.
int RunTrainLive(const LearnFlags& f, const std::string& in, const std::string& out,
                 std::unique_ptr<DocumentReader> reader, uint64_t length);

// Learns `in` on the MPI ranks (started by mpirun) as `mode` says, and
// writes `out` from rank 0: kOneLearner, one learner per rank composed every
// round, into `model` (fresh, or a --resume snapshot: equal on every rank);
// kSelect, the defaults' search with the candidates shared among the ranks
// (the model one process keeps); kLive, the live learner on rank 0 (it is
// sequential), the other ranks waiting. `reader` has read the stream's
// header; `length` is the stream's n. Returns the exit code; every rank
// returns together (an error on one is reported by it and by rank 0).
// Without MPI in the build: an error saying so.
int RunTrainDistributed(const LearnFlags& f, const std::string& in, const std::string& out, TrainMode mode,
                        std::unique_ptr<Model> model, std::unique_ptr<DocumentReader> reader, uint64_t length);

// `tributary` does not link Open MPI, whose libraries cost every command
// ~1.5 ms of start-up; an MPI build also makes `tributary-mpi`, the same
// program linked with it. `train --distributed` calls this first: in
// `tributary` it replaces the process (execv: the same process id, so mpirun
// sees no difference) with the `tributary-mpi` found in this program's own
// directory, with the arguments `main` got (SetProgramArguments), and
// returns only if that fails (the error reported, the exit code returned). It
// returns -1 in `tributary-mpi` (go on) and in a build without MPI
// (RunTrainDistributed then says so).
int ExecMpiProgram();

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_COMMANDS_TRAIN_DISTRIBUTED_H_
