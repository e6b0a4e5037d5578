// `tributary plugins`: the plugins found and the files refused; with
// --options NAME, the option table of the plugin(s) named NAME.
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

json OptionJson(const OptionSpec& o) {
  json j = {{"name", o.name}, {"type", o.type_name()}, {"help", o.help}};
  if (o.is_alias()) {
    j["alias_of"] = o.alias_of;
    return j;
  }
  j["default"] = o.has_default ? json(o.default_value) : json(nullptr);
  j["default_is_derived"] = o.derived_default();
  if (o.type == TRIB_OPTION_NUMBER || o.type == TRIB_OPTION_INTEGER) {
    // Unbounded ends are null (JSON has no infinity).
    j["min"] = std::isfinite(o.min) ? json(o.min) : json(nullptr);
    j["max"] = std::isfinite(o.max) ? json(o.max) : json(nullptr);
    j["min_exclusive"] = (o.flags & TRIB_OPTION_MIN_EXCLUSIVE) != 0;
    j["max_exclusive"] = (o.flags & TRIB_OPTION_MAX_EXCLUSIVE) != 0;
    j["words"] = o.choices;
  } else if (o.type == TRIB_OPTION_CHOICE) {
    j["choices"] = o.choices;
  }
  j["range"] = o.range();
  j["expected"] = o.expected();
  return j;
}

// The plugins `name_or_path` names: a family, a loss, or both when a family
// and a loss share the name.
Result<std::vector<std::shared_ptr<const Plugin>>> PluginsNamed(const PluginRegistry& reg,
                                                                const std::string& name_or_path) {
  std::vector<std::shared_ptr<const Plugin>> found;
  std::vector<Status> errors;
  for (trib_plugin_kind kind : {TRIB_KIND_FAMILY, TRIB_KIND_LOSS}) {
    auto r = reg.Find(name_or_path, kind);
    if (r.ok()) {
      found.push_back(*r);
    } else {
      errors.push_back(r.status());
    }
  }
  if (!found.empty()) return found;
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".so");
  if (is_path) return errors.front();
  std::string families, losses;
  for (const auto& p : reg.plugins()) {
    std::string& list = p->kind == TRIB_KIND_FAMILY ? families : losses;
    list += (list.empty() ? "" : ", ") + p->name;
  }
  return Status::NotFound("no family or loss plugin named '" + name_or_path +
                          "' (families: " + (families.empty() ? "none" : families) +
                          "; losses: " + (losses.empty() ? "none" : losses) + ")");
}

int RunOptions(const std::string& name, bool as_json) {
  auto found = PluginsNamed(Registry(), name);
  if (!found.ok()) return ReportError(found.status());
  if (as_json) {
    json j;
    j["plugins"] = json::array();
    for (const auto& p : *found) {
      json pj = {
          {"kind", KindName(p->kind)}, {"name", p->name},
          {"version", p->version},     {"abi", std::to_string(p->abi_major) + "." + std::to_string(p->abi_minor)},
          {"path", p->path},           {"option_table", p->has_option_table()}};
      pj["options"] = json::array();
      for (const auto& o : p->options()) pj["options"].push_back(OptionJson(o));
      j["plugins"].push_back(pj);
    }
    std::cout << j.dump(2) << std::endl;
    return kExitOk;
  }
  bool first = true;
  for (const auto& p : *found) {
    if (!first) std::cout << '\n';
    first = false;
    std::cout << KindName(p->kind) << ' ' << p->name << ' ' << p->version << " (" << p->path << ")";
    if (!p->has_option_table()) {
      std::cout << ": no option table (the plugin does not export " TRIB_PLUGIN_OPTIONS_SYMBOL
                   ", ABI 1.3; see its documentation for its options)\n";
      continue;
    }
    if (p->options().empty()) {
      std::cout << ": takes no options\n";
      continue;
    }
    std::cout << "\nname\ttype\tdefault\trange\thelp\n";
    for (const auto& o : p->options()) {
      std::cout << o.name << '\t' << o.type_name() << '\t'
                << (o.is_alias() || !o.has_default ? std::string("-") : o.default_value) << '\t'
                << (o.range().empty() ? std::string("-") : o.range()) << '\t' << o.help << '\n';
    }
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

Runner SetUpPlugins(CLI::App* cmd) {
  auto as_json = std::make_shared<bool>(false);
  auto options_of = std::make_shared<std::string>();
  cmd->add_flag("--json", *as_json, "JSON output");
  cmd->add_option("--options", *options_of,
                  "print the options of the plugin NAME (a family, a loss, or a path): name, type, default, "
                  "range or choices, help");
  return [as_json, options_of] {
    if (!options_of->empty()) return RunOptions(*options_of, *as_json);
    return RunPlugins(*as_json);
  };
}

}  // namespace tributary::cli
