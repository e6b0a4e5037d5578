// Kernel benchmark of the "lda" family: one sdEM step (score = VI local step,
// accumulate, apply, commit) per document, against the vocabulary size (the
// same documents: cost must not grow with V) and against document length x K
// (cost should grow with both). Documents draw terms uniformly from the first
// 1,000 ids so that the same documents fit every vocabulary.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/schema.h"
#include "tributary/sdem_learner.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

const PluginRegistry& Registry() {
  static PluginRegistry* reg = [] {
    auto* r = new PluginRegistry(std::vector<std::string>{PluginRegistry::BuiltinPluginDir()}, true);
    r->Scan();
    return r;
  }();
  return *reg;
}

std::vector<DocumentBuffer> Docs(uint32_t distinct, size_t n) {
  std::mt19937_64 rng(3);
  std::vector<DocumentBuffer> docs(n);
  for (size_t i = 0; i < n; ++i) {
    docs[i].index = i;
    std::vector<char> used(1000, 0);
    while (docs[i].term_ids.size() < distinct) {
      uint32_t t = static_cast<uint32_t>(rng() % 1000);
      if (used[t]) continue;
      used[t] = 1;
      docs[i].term_ids.push_back(t);
    }
    std::sort(docs[i].term_ids.begin(), docs[i].term_ids.end());
    docs[i].term_counts.assign(distinct, 1.0);
  }
  return docs;
}

void Step(benchmark::State& state, uint64_t V, uint32_t K, uint32_t distinct) {
  v1::Schema proto;
  proto.set_hashed_dim(V);
  proto.add_class_names("c0");
  auto schema = ModelSchema::FromProto(proto);
  auto fam = Registry().Find("lda", TRIB_KIND_FAMILY);
  auto loss = Registry().Find("nll", TRIB_KIND_LOSS);
  if (!schema.ok() || !fam.ok() || !loss.ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  auto m = Model::Create(*fam, *loss, *schema, {{"topics", std::to_string(K)}});
  if (!m.ok()) {
    state.SkipWithError(m.status().ToString().c_str());
    return;
  }
  (*m)->learner_state().effective_size = 1e5;
  (void)(*m)->Rebuild(trib_step{0.0, 1e5, 0.0, 0});
  auto learner = SdemLearner::Create(m->get());
  auto docs = Docs(distinct, 256);
  size_t i = 0;
  for (auto _ : state) {
    Status st = (*learner)->Learn(docs[i++ % docs.size()].View());
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["ns_per_term_topic"] = benchmark::Counter(static_cast<double>(state.iterations()) * distinct * K,
                                                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_LdaStepVsVocabulary(benchmark::State& state) { Step(state, static_cast<uint64_t>(state.range(0)), 20, 100); }
BENCHMARK(BM_LdaStepVsVocabulary)->Arg(1000)->Arg(100000)->Arg(1000000);

void BM_LdaStepVsLengthAndTopics(benchmark::State& state) {
  Step(state, 100000, static_cast<uint32_t>(state.range(1)), static_cast<uint32_t>(state.range(0)));
}
BENCHMARK(BM_LdaStepVsLengthAndTopics)->ArgsProduct({{25, 100, 400}, {10, 40}});

}  // namespace
}  // namespace tributary

BENCHMARK_MAIN();
