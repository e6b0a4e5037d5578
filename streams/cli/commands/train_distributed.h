// `tributary train --distributed` (commands/train_distributed.cc).
#ifndef TRIBUTARY_STREAMS_CLI_COMMANDS_TRAIN_DISTRIBUTED_H_
#define TRIBUTARY_STREAMS_CLI_COMMANDS_TRAIN_DISTRIBUTED_H_

#include <memory>
#include <string>

#include "cli_common.h"
#include "tributary/model.h"
#include "tributary/stream_io.h"

namespace tributary::cli {

// Learns `in` with one learner per MPI rank (started by mpirun) into
// `model` (fresh, or a --resume snapshot: equal on every rank) and writes
// it to `out` from rank 0. `reader` has read the stream's header. Returns the
// exit code; every rank returns together (an error on one is reported by it
// and by rank 0). Without MPI in the build: an error saying so.
int RunTrainDistributed(const LearnFlags& f, const std::string& in, const std::string& out,
                        std::unique_ptr<Model> model, std::unique_ptr<DocumentReader> reader);

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
