// The `tributary` command-line program. Script-facing names and flags are
// stable. Each subcommand lives in its own file, and commands/commands.h
// (Commands()) lists them all; Main only parses the command line and runs
// the subcommand given.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli_common.h"
#include "commands/commands.h"
#include "tributary/version.h"

namespace tributary::cli {

namespace {

constexpr const char* kConfigHelp =
    "read options from this TOML file: a subcommand's in its table ([serve] then data-dir = \"/var/lib/tributary\"), "
    "the top-level ones (plugin = [\"...\"]) before any table; keys are the long option names without their "
    "dashes; options on the command line override the file; an unknown key is an error";

// `--config FILE` on every subcommand (and theirs), as well as before the
// subcommand: the file is read by the top-level option (CLI11 reads it once
// the whole line is parsed, before requirements are checked), so a
// subcommand's --config hands its value to it as soon as it is parsed.
void AddConfigOption(CLI::App* cmd, CLI::Option* top) {
  cmd->add_option_function<std::string>(
         "--config",
         [top](const std::string& file) {
           if (top->count() > 0) throw CLI::ArgumentMismatch("--config: given more than once");
           top->add_result(file);
         },
         kConfigHelp)
      ->type_name("FILE")
      ->configurable(false)
      ->trigger_on_parse();
  for (CLI::App* sub : cmd->get_subcommands({})) AddConfigOption(sub, top);
}

// The file(s) --config named, for messages.
std::string ConfigFiles(const CLI::Option* top) {
  std::string out;
  for (const std::string& f : top->results()) out += (out.empty() ? "'" : ", '") + f + "'";
  return out;
}

// CLI11's messages about a config file name neither the file nor, for an
// unknown key, what the key is: these do.
int ReportConfigError(const CLI::ParseError& err, const CLI::Option* top) {
  const std::string what = err.what();
  const std::string files = ConfigFiles(top);
  std::cerr << "tributary: error: --config " << files << ": ";
  static const std::string kExtras = "INI was not able to parse ";
  if (what.rfind(kExtras, 0) == 0) {
    std::string key = what.substr(kExtras.size());
    // A table that names no subcommand shows as its open/close marker.
    for (const char* marker : {".++", ".--"}) {
      const std::string m = marker;
      if (key.size() > m.size() && key.compare(key.size() - m.size(), m.size(), m) == 0) {
        std::cerr << "unknown table [" << key.substr(0, key.size() - m.size()) << "]: no such subcommand" << std::endl;
        return kExitUsage;
      }
    }
    const size_t dot = key.rfind('.');
    std::cerr << "unknown key '" << key << "': "
              << (dot == std::string::npos
                      ? std::string("tributary has no option --") + key
                      : "tributary " + key.substr(0, dot) + " has no option --" + key.substr(dot + 1))
              << " (keys are long option names without their dashes; a subcommand's go in its [table])" << std::endl;
  } else if (err.get_name() == "FileError") {
    // CLI11 tells none of these apart.
    const std::string file = top->results().empty() ? std::string() : top->results().back();
    std::error_code ec;
    const auto st = std::filesystem::status(file, ec);
    std::cerr << (!std::filesystem::exists(st)        ? "no such file"
                  : std::filesystem::is_directory(st) ? "a directory, not a file"
                                                      : "cannot read the file (permission?)")
              << std::endl;
  } else {
    std::cerr << what << std::endl;
  }
  return kExitUsage;
}

}  // namespace

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
  CLI::Option* config = app.set_config("--config", "", kConfigHelp);
  config->type_name("FILE");
  app.allow_config_extras(CLI::config_extras_mode::error);

  std::vector<std::pair<const CLI::App*, Runner>> commands;
  for (const Command& command : Commands()) {
    CLI::App* cmd = app.add_subcommand(command.name, command.description);
    commands.emplace_back(cmd, command.set_up(cmd));
    AddConfigOption(cmd, config);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ConfigError& err) {
    return ReportConfigError(err, config);
  } catch (const CLI::FileError& err) {
    if (config->count() > 0) return ReportConfigError(err, config);
    return app.exit(err) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::ParseError& err) {
    const int rc = app.exit(err);
    if (rc != 0 && config->count() > 0) {
      std::cerr << "tributary: note: options were also read from --config " << ConfigFiles(config) << std::endl;
    }
    return rc == 0 ? kExitOk : kExitUsage;
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
