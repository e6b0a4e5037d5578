// `tributary topics`: each topic's (component's) most probable terms.
#include <algorithm>
#include <cstddef>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands/commands.h"

namespace tributary::cli {
namespace {

using json = nlohmann::json;

struct TopicsFlags {
  std::string model;
  uint32_t top = 10;
  bool as_json = false;
};

int RunTopics(const std::string& path, uint32_t top, bool as_json) {
  auto mr = Model::Load(path, Registry());
  if (!mr.ok()) return ReportError(NameFile(mr.status(), path));
  const Model& m = **mr;
  const auto& vocab = m.schema().vocabulary();
  json topics = json::array();
  std::vector<double> p;
  for (uint32_t k = 0; k < m.num_components(); ++k) {
    Status st = m.ComponentTerms(k, &p);
    if (!st.ok()) return ReportError(NameFile(st, path));
    std::vector<uint32_t> ids(p.size());
    for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
    const size_t n = std::min<size_t>(top, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](uint32_t a, uint32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    json terms = json::array();
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = ids[i];
      terms.push_back({{"term", id < vocab.size() ? vocab[id] : "#" + std::to_string(id)}, {"id", id}, {"p", p[id]}});
    }
    topics.push_back({{"topic", k}, {"terms", terms}});
  }
  if (as_json) {
    std::cout << json{{"family", m.family().name}, {"topics", topics}}.dump() << std::endl;
    return kExitOk;
  }
  for (const auto& t : topics) {
    std::cout << "topic " << t["topic"].get<uint32_t>() << ":";
    for (const auto& term : t["terms"]) std::cout << ' ' << term["term"].get<std::string>();
    std::cout << '\n';
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

Runner SetUpTopics(CLI::App* cmd) {
  auto f = std::make_shared<TopicsFlags>();
  cmd->add_option("--model", f->model, "model snapshot")->required();
  cmd->add_option("--top", f->top, "terms per topic")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--json", f->as_json, "JSON output");
  return [f] { return RunOnInput(f->model, [&] { return RunTopics(f->model, f->top, f->as_json); }); };
}

}  // namespace tributary::cli
