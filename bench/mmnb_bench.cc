// Google Benchmark kernels for the "mmnb" family: one sdEM step
// (SdemLearner::Learn: local variational step, nll weights, accumulate, lazy
// update, commit) per document, against the number of components K and of
// features F (half REAL, a quarter COUNT, a quarter CATEGORICAL with 8
// categories), for the standard (eq. 13-14) and fast (eq. 23-24) local steps.
// Arguments: {K, F, fast}. Documents come from a fixed-seed generator; each
// benchmark cycles through 4096 of them.
//
// Benchmarks, not tests: nothing here is run by ctest.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/sdem_learner.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "mmnb_bench: %s\n", what.c_str());
  std::exit(1);
}

const PluginRegistry& Registry() {
  static PluginRegistry* reg = [] {
    auto* r = new PluginRegistry(std::vector<std::string>{PluginRegistry::BuiltinPluginDir()}, true);
    r->Scan();
    return r;
  }();
  return *reg;
}

std::shared_ptr<const Plugin> Find(const std::string& name, trib_plugin_kind kind) {
  auto r = Registry().Find(name, kind);
  if (!r.ok()) Die(r.status().ToString());
  return *r;
}

void BM_MmnbLearn(benchmark::State& state) {
  const uint32_t K = static_cast<uint32_t>(state.range(0));
  const uint32_t F = static_cast<uint32_t>(state.range(1));
  const bool fast = state.range(2) != 0;
  const uint32_t nreal = F / 2, ncount = F / 4, ncat = F - nreal - ncount;
  v1::Schema proto;
  for (uint32_t i = 0; i < F; ++i) {
    auto* f = proto.add_features();
    f->set_name("f" + std::to_string(i));
    if (i < nreal) {
      f->set_kind(v1::FeatureSpec::REAL);
    } else if (i < nreal + ncount) {
      f->set_kind(v1::FeatureSpec::COUNT);
    } else {
      f->set_kind(v1::FeatureSpec::CATEGORICAL);
      for (int r = 0; r < 8; ++r) f->add_categories("v" + std::to_string(r));
    }
  }
  proto.add_class_names("y");
  auto schema = ModelSchema::FromProto(proto);
  if (!schema.ok()) Die(schema.status().ToString());
  auto m = Model::Create(Find("mmnb", TRIB_KIND_FAMILY), Find("nll", TRIB_KIND_LOSS), *schema,
                         {{"components", std::to_string(K)}, {"inference", fast ? "fast" : "standard"}});
  if (!m.ok()) Die(m.status().ToString());
  auto model = std::move(m).value();
  model->learner_state().effective_size = 100000;
  model->learner_state().schedule.kind = StepSchedule::Kind::kPolynomial;
  model->learner_state().schedule.tau0 = 10;
  if (!model->Rebuild(trib_step{0.0, 100000.0, 0.0, 0}).ok()) Die("rebuild");
  auto learner = SdemLearner::Create(model.get());
  if (!learner.ok()) Die(learner.status().ToString());
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal;
  std::vector<DocumentBuffer> docs(4096);
  for (size_t i = 0; i < docs.size(); ++i) {
    auto& d = docs[i];
    d.index = i;
    for (uint32_t j = 0; j < nreal; ++j) d.reals.push_back(normal(rng) + static_cast<double>(i % 3) * 3);
    for (uint32_t j = 0; j < ncount; ++j) d.reals.push_back(static_cast<double>(rng() % 10));
    for (uint32_t j = 0; j < ncat; ++j) d.categoricals.push_back(static_cast<uint32_t>(rng() % 8));
  }
  size_t i = 0;
  for (auto _ : state) {
    Status st = (*learner)->Learn(docs[i].View());
    if (!st.ok()) Die(st.ToString());
    i = (i + 1) % docs.size();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

BENCHMARK(BM_MmnbLearn)
    ->ArgsProduct({{3, 10, 30}, {8, 32, 128}, {0, 1}})
    ->ArgNames({"K", "F", "fast"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tributary

BENCHMARK_MAIN();
