// The `tributary` command-line program. Script-facing names and flags are
// stable. Each subcommand lives in its own file, and commands/commands.h
// (Commands()) lists them all; Main only parses the command line and runs
// the subcommand given.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <utility>
#include <vector>

#include "cli_common.h"
#include "commands/commands.h"
#include "tributary/version.h"

namespace tributary::cli {

int Main(int argc, char** argv) {
  SetProgramArguments(argv);
  CLI::App app{"Tributary: online learning of probabilistic models from document streams (sdEM, SEP)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tributary ") + Version());
  // Plugin files the user names: loaded and registered under their names
  // before the command runs, so that models naming them find them (a model
  // file itself never makes the program load a file).
  std::vector<std::string> plugin_files;
  app.add_option("--plugin", plugin_files,
                 "load this plugin file (family or loss) and register it by its name, e.g. for a model trained with "
                 "a plugin named by path; repeatable; before the command")
      ->type_name("PATH");

  std::vector<std::pair<const CLI::App*, Runner>> commands;
  for (const Command& command : Commands()) {
    CLI::App* cmd = app.add_subcommand(command.name, command.description);
    commands.emplace_back(cmd, command.set_up(cmd));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    return app.exit(err) == 0 ? kExitOk : kExitUsage;
  }
  for (const std::string& path : plugin_files) {
    Status st = Registry().Add(path);
    if (!st.ok()) return ReportError(st.WithContext("--plugin"));
  }
  for (const auto& [cmd, run] : commands) {
    if (*cmd) return run();
  }
  return kExitUsage;
}

}  // namespace tributary::cli

int main(int argc, char** argv) {
  int rc = tributary::cli::kExitError;
  try {
    rc = tributary::cli::Main(argc, argv);
  } catch (const std::exception& ex) {
    std::cerr << "tributary: internal error: " << ex.what() << std::endl;
  }
  // Standard output is the result of most commands (eval --json, predict,
  // inspect, topics): a failure to write it - a full disk behind a
  // redirection - is an error, never exit 0 with the output cut short.
  errno = 0;
  std::cout.flush();
  const bool failed = !std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (failed) {
    const int e = errno;
    std::cerr << "tributary: error: writing standard output failed"
              << (e != 0 ? std::string(": ") + std::strerror(e) : "") << std::endl;
    return rc == tributary::cli::kExitOk ? tributary::cli::kExitError : rc;
  }
  return rc;
}
