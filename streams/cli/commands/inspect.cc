// `tributary inspect`: summary of a model snapshot.
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_common.h"
#include "commands/commands.h"
#include "posterior_summary.h"
#include "tributary/live_learner.h"

namespace tributary::cli {
namespace {

using json = nlohmann::json;

// The value of every option in `plugin`'s option table (table order, aliases
// folded into their option): what `options` gave (the last value, under any
// name of the option), or the table's default, marked "default": true.
json OptionValues(const Plugin& plugin, const Options& options) {
  json out = json::array();
  for (const auto& spec : plugin.options()) {
    if (spec.is_alias()) continue;
    const std::string* given = nullptr;
    for (const auto& [k, v] : options) {
      const OptionSpec* o = plugin.FindOption(k);
      if (o != nullptr && o->name == spec.name) given = &v;
    }
    json e = {{"name", spec.name}, {"default", given == nullptr}};
    if (given != nullptr) {
      e["value"] = *given;
    } else {
      e["value"] = spec.has_default ? json(spec.default_value) : json(nullptr);
      if (spec.derived_default()) e["derived"] = true;  // e.g. "1/K": the plugin derives it
    }
    out.push_back(e);
  }
  return out;
}

struct InspectFlags {
  std::string model;
  bool as_json = false;
};

int RunInspect(const std::string& path, bool as_json) {
  uint64_t wal_sequence = 0;  // the server's log position, kept in the snapshot
  auto mr = Model::Load(path, Registry(), nullptr, &wal_sequence);
  if (!mr.ok()) return ReportError(NameFile(mr.status(), path));
  const Model& m = **mr;
  const auto& ls = m.learner_state();
  json j;
  j["family"] = m.family().name;
  j["family_version"] = m.family().version;
  j["loss"] = m.loss_plugin() ? m.loss_plugin()->name : "";
  j["classes"] = m.schema().classes();
  j["vocabulary_size"] = m.schema().vocab_size();
  // "open": terms are added as they come (vocab_capacity: the room the
  // statistics have); "hashed"; or "closed".
  j["vocabulary"] = m.schema().open_vocabulary() ? "open" : m.schema().hashed() ? "hashed" : "closed";
  if (m.schema().open_vocabulary()) j["vocab_capacity"] = m.vocab_capacity();
  j["statistics"] = m.stats().size();
  j["updates"] = ls.updates;
  j["effective_size"] = ls.effective_size;
  j["schedule"] = ls.schedule.ToString();
  j["skipped_documents"] = ls.skipped_documents;
  j["wal_sequence"] = wal_sequence;
  j["stats_digest"] = m.StatsDigest();
  json opts = json::object();
  for (const auto& [k, v] : m.family_options()) opts[k] = v;
  j["family_options"] = opts;
  json lopts = json::object();
  for (const auto& [k, v] : m.loss_options()) lopts[k] = v;
  j["loss_options"] = lopts;
  // With the plugins' option tables (ABI 1.3): every option's value, the
  // defaults included.
  if (m.family().has_option_table()) j["family_option_values"] = OptionValues(m.family(), m.family_options());
  if (m.loss_plugin() && m.loss_plugin()->has_option_table()) {
    j["loss_option_values"] = OptionValues(*m.loss_plugin(), m.loss_options());
  }
  j["outputs"] = m.num_outputs();
  j["outputs_kind"] = m.latent_outputs() ? "latent" : "classes";
  // The posterior summary of families trained by SEP / EP / ADF (mixing
  // weights, per-component means and variances).
  if (Status st = AddPosteriorSummary(m, &j); !st.ok()) return ReportError(NameFile(st, path));
  // How train's defaults chose the model (trainer.h).
  if (!m.training_report().empty()) {
    json tr = json::parse(m.training_report(), nullptr, false);
    if (!tr.is_discarded()) j["training"] = tr;
  }
  // A live learner's snapshot (serve, prequential --out): the model above is
  // its served candidate; the learner (every candidate, the documents it
  // learned and holds, its alarms) is resumed to be shown.
  if (LiveLearner::Holds(m)) {
    auto live = LiveLearner::FromModel(std::move(mr).value(), Registry());
    if (!live.ok()) return ReportError(NameFile(live.status(), path));
    json lj = json::parse((*live)->ToJson(), nullptr, false);
    if (!lj.is_discarded()) {
      lj["held"] = (*live)->held();
      // Each candidate's statistics digest: equal digests, equal candidates.
      for (size_t i = 0; i < (*live)->num_candidates() && i < lj["candidates"].size(); ++i) {
        lj["candidates"][i]["stats_digest"] = (*live)->candidate_model(i).StatsDigest();
      }
      j["live"] = lj;
    }
  }
  if (as_json) {
    std::cout << j.dump() << std::endl;
  } else {
    // Long vectors (a component's V shape means) are cut to their first
    // values in the text form; --json prints them whole.
    constexpr size_t kShow = 8;
    auto shorten = [](const json& v) {
      if (!v.is_array() || v.size() <= kShow) return v.dump();
      json head = json::array();
      for (size_t i = 0; i < kShow; ++i) head.push_back(v[i]);
      std::string d = head.dump();
      d.insert(d.size() - 1, ",... (" + std::to_string(v.size()) + " values; --json for all)");
      return d;
    };
    for (auto& [k, v] : j.items()) {
      if (k == "family_option_values" || k == "loss_option_values") {
        // "family option prior\t1 (default)"
        for (const auto& e : v) {
          std::cout << k.substr(0, k.find('_')) << " option " << e["name"].get<std::string>() << "\t"
                    << (e["value"].is_null() ? std::string("-") : e["value"].get<std::string>())
                    << (e["default"].get<bool>() ? " (default)" : "") << "\n";
        }
        continue;
      }
      if (k != "components") {
        std::cout << k << "\t" << shorten(v) << "\n";
        continue;
      }
      for (size_t c = 0; c < v.size(); ++c) {
        for (auto& [name, vec] : v[c].items())
          std::cout << "component " << c << " " << name << "\t" << shorten(vec) << "\n";
      }
    }
    std::cout.flush();
  }
  return kExitOk;
}

}  // namespace

Runner SetUpInspect(CLI::App* cmd) {
  auto f = std::make_shared<InspectFlags>();
  cmd->add_option("--model", f->model, "model snapshot")->required();
  cmd->add_flag("--json", f->as_json, "JSON output");
  return [f] { return RunOnInput(f->model, [&] { return RunInspect(f->model, f->as_json); }); };
}

}  // namespace tributary::cli
