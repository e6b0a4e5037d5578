// Cost of one sdEM step (score = K Gibbs chains + accumulate + commit) of the
// lda-classifier family per document, against the vocabulary size and the
// number of topics: it must not grow with the vocabulary.
//   lda_classifier_bench --benchmark_filter=Learn
// Arguments: vocabulary size, topics per class. 10 classes, 30-token
// documents (about 25 distinct terms), default Gibbs settings
// (burn_in 3, samples 5, share_word_topic 1).
#include <benchmark/benchmark.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/schema.h"
#include "tributary/sdem_learner.h"
#include "tributary/v1/tributary.pb.h"

namespace {

using namespace tributary;

const PluginRegistry& Registry() {
  static PluginRegistry* reg = [] {
    auto* r = new PluginRegistry(std::vector<std::string>{PluginRegistry::BuiltinPluginDir()}, true);
    r->Scan();
    return r;
  }();
  return *reg;
}

std::shared_ptr<const Plugin> Find(const std::string& name, trib_plugin_kind kind) {
  auto p = Registry().Find(name, kind);
  if (!p.ok()) throw std::runtime_error(p.status().ToString());
  return *p;
}

constexpr uint32_t kClasses = 10, kTokens = 30, kDocs = 4096;

void BM_Learn(benchmark::State& state, const char* loss) {
  const uint32_t vocab = static_cast<uint32_t>(state.range(0));
  const uint32_t topics = static_cast<uint32_t>(state.range(1));
  v1::Schema proto;
  proto.set_hashed_dim(vocab);
  for (uint32_t k = 0; k < kClasses; ++k) proto.add_class_names("c" + std::to_string(k));
  auto schema = ModelSchema::FromProto(proto);
  if (!schema.ok()) throw std::runtime_error(schema.status().ToString());
  auto model = Model::Create(Find("lda-classifier", TRIB_KIND_FAMILY), Find(loss, TRIB_KIND_LOSS), *schema,
                             {{"topics", std::to_string(topics)}});
  if (!model.ok()) throw std::runtime_error(model.status().ToString());
  (*model)->learner_state().effective_size = 1e6;
  auto learner = SdemLearner::Create(model->get());
  if (!learner.ok()) throw std::runtime_error(learner.status().ToString());
  std::mt19937_64 rng(1);
  std::vector<DocumentBuffer> docs(kDocs);
  for (uint32_t i = 0; i < kDocs; ++i) {
    DocumentBuffer& d = docs[i];
    d.index = i;
    d.label = static_cast<int64_t>(i % kClasses);
    for (uint32_t t = 0; t < kTokens; ++t) {
      // Class-dependent Zipf-ish terms: most mass on a few hundred ids.
      const uint64_t r = rng() % 1000;
      d.term_ids.push_back(static_cast<uint32_t>((r * r / 1000 + 97 * d.label) % vocab));
      d.term_counts.push_back(1.0);
    }
    d.Canonicalize();
  }
  size_t i = 0;
  for (auto _ : state) {
    Status st = (*learner)->Learn(docs[i++ % kDocs].View());
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t v : {1000, 100000, 1000000})
    for (int64_t z : {2, 8}) b->Args({v, z});
}

BENCHMARK_CAPTURE(BM_Learn, nll, "nll")->Apply(Args);
BENCHMARK_CAPTURE(BM_Learn, ncll, "ncll")->Apply(Args);
BENCHMARK_CAPTURE(BM_Learn, hinge, "hinge")->Apply(Args);

}  // namespace

BENCHMARK_MAIN();
