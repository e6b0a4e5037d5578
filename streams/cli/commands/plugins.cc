// `tributary plugins`: the plugins found and the files refused.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_common.h"
#include "commands/commands.h"
#include "tributary/plugin_registry.h"

namespace tributary::cli {
namespace {

using json = nlohmann::json;

int RunPlugins(bool as_json) {
  const auto& reg = Registry();
  if (as_json) {
    json j;
    j["search_path"] = reg.search_path();
    j["plugins"] = json::array();
    for (const auto& p : reg.plugins()) {
      j["plugins"].push_back({{"kind", KindName(p->kind)},
                              {"name", p->name},
                              {"version", p->version},
                              {"abi", std::to_string(p->abi_major) + "." + std::to_string(p->abi_minor)},
                              {"builtin", p->builtin},
                              {"path", p->path},
                              {"description", p->description}});
    }
    j["refused"] = json::array();
    for (const auto& r : reg.refused()) j["refused"].push_back({{"path", r.path}, {"reason", r.reason}});
    std::cout << j.dump(2) << std::endl;
    return kExitOk;
  }
  std::cout << "kind\tname\tversion\tabi\tpath\n";
  for (const auto& p : reg.plugins()) {
    std::cout << KindName(p->kind) << '\t' << p->name << '\t' << p->version << '\t' << p->abi_major << '.'
              << p->abi_minor << '\t' << p->path << (p->builtin ? " (built-in)" : "") << '\n';
  }
  for (const auto& r : reg.refused()) std::cout << "refused\t" << r.path << ": " << r.reason << '\n';
  std::cout.flush();
  return kExitOk;
}

}  // namespace

Runner SetUpPlugins(CLI::App* cmd) {
  auto as_json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *as_json, "JSON output");
  return [as_json] { return RunPlugins(*as_json); };
}

}  // namespace tributary::cli
