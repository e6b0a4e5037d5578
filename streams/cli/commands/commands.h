// The subcommands of the `tributary` program: a table that Main walks to add
// them to the command line and to run the one given. Each command lives in
// its own file (commands/<name>.cc; predict and infer in predict.cc), which owns
// its options, their storage and the code that runs it.
#ifndef TRIBUTARY_STREAMS_CLI_COMMANDS_COMMANDS_H_
#define TRIBUTARY_STREAMS_CLI_COMMANDS_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace tributary::cli {

// Runs a subcommand with the values parsed into its options; returns the
// program's exit code (cli_common.h).
using Runner = std::function<int()>;

struct Command {
  const char* name;
  const char* description;  // the line `tributary --help` shows
  // Adds the command's options to `cmd` (the subcommand `name`, which the
  // caller has added) and returns what runs it once the line is parsed.
  Runner (*set_up)(CLI::App* cmd);
};

// Every subcommand, in the order `tributary --help` lists them.
const std::vector<Command>& Commands();

// The set-up of each command (Command::set_up).
Runner SetUpConvert(CLI::App* cmd);      // commands/convert.cc
Runner SetUpTrain(CLI::App* cmd);        // commands/train.cc
Runner SetUpEval(CLI::App* cmd);         // commands/eval.cc
Runner SetUpPredict(CLI::App* cmd);      // commands/predict.cc
Runner SetUpInfer(CLI::App* cmd);        // commands/predict.cc
Runner SetUpTopics(CLI::App* cmd);       // commands/topics.cc
Runner SetUpPrequential(CLI::App* cmd);  // commands/prequential.cc
Runner SetUpPlugins(CLI::App* cmd);      // commands/plugins.cc
Runner SetUpInspect(CLI::App* cmd);      // commands/inspect.cc
Runner SetUpPluginCheck(CLI::App* cmd);  // commands/plugin_check.cc
Runner SetUpServe(CLI::App* cmd);        // commands/serve.cc
Runner SetUpClient(CLI::App* cmd);       // commands/client.cc

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_COMMANDS_COMMANDS_H_
