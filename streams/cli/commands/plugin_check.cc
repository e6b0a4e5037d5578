// `tributary plugin-check PATH.so`: the conformance checks of a family or
// loss plugin file (tributary/plugin_check.h), one line per check and a
// summary, or --json. Exit 0 when every check passes, 1 when one fails.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_common.h"
#include "commands/commands.h"
#include "tributary/plugin_check.h"

namespace tributary::cli {
namespace {

using json = nlohmann::json;

int RunPluginCheck(const std::string& path, const PluginCheckOptions& options, bool as_json) {
  // The registry of the program (built-ins and $TRIBUTARY_PLUGIN_PATH): the
  // losses and the family the checks train with are found there by name.
  const PluginCheckReport report = CheckPlugin(Registry(), path, options);
  const size_t passed = report.Count(CheckOutcome::kPass);
  const size_t failed = report.Count(CheckOutcome::kFail);
  const size_t skipped = report.Count(CheckOutcome::kSkip);
  if (as_json) {
    json j;
    j["path"] = report.path;
    j["loaded"] = report.loaded;
    j["kind"] = report.kind;
    j["name"] = report.name;
    j["version"] = report.version;
    j["schema"] = report.schema;
    j["info"] = json::object();
    for (const auto& [k, v] : report.info) j["info"][k] = v;
    j["checks"] = json::array();
    for (const auto& c : report.checks) {
      j["checks"].push_back({{"name", c.name}, {"result", CheckOutcomeName(c.outcome)}, {"message", c.message}});
    }
    j["passed"] = passed;
    j["failed"] = failed;
    j["skipped"] = skipped;
    j["ok"] = report.ok();
    std::cout << j.dump(2) << std::endl;
  } else {
    if (report.loaded) {
      std::cout << "plugin-check: " << report.kind << " '" << report.name << "' " << report.version << " ("
                << report.path << ")";
      if (!report.schema.empty()) std::cout << ", schema " << report.schema;
      std::cout << '\n';
      for (const auto& [k, v] : report.info) std::cout << "INFO " << k << " = " << v << '\n';
    }
    for (const auto& c : report.checks) {
      std::cout << CheckOutcomeName(c.outcome) << ' ' << c.name;
      if (!c.message.empty()) std::cout << ": " << c.message;
      std::cout << '\n';
    }
    std::cout << (report.ok() ? "OK" : "FAILED") << ": " << passed << " passed, " << failed << " failed, " << skipped
              << " skipped" << std::endl;
  }
  return report.ok() ? kExitOk : kExitError;
}

}  // namespace

Runner SetUpPluginCheck(CLI::App* cmd) {
  auto path = std::make_shared<std::string>();
  auto options = std::make_shared<PluginCheckOptions>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("path", *path, "the plugin file (.so) to check")->required();
  cmd->add_option("--documents", options->documents, "length of the generated stream")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000}));
  cmd->add_option("--seed", options->seed, "seed of the generated stream and the models")->capture_default_str();
  cmd->add_flag("--json", *as_json, "JSON output");
  return [path, options, as_json] { return RunPluginCheck(*path, *options, *as_json); };
}

}  // namespace tributary::cli
