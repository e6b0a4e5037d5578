// Kernel benchmark of the "lda" family: one sdEM step (score = the local step,
// CVB0 with 5 sweeps or VI, then accumulate, apply, commit) per document,
// against the vocabulary size (the same documents: cost must not grow with V)
// and against document length x K (cost should grow with both). Documents
// draw terms uniformly from the first 1,000 ids so that the same documents
// fit every vocabulary. BM_LdaRecovery: topic recovery at the size
// (bench/lda_recovery.sh).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "../plugins/lda/lda_synthetic.h"
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

void Step(benchmark::State& state, uint64_t V, uint32_t K, uint32_t distinct, const char* inference) {
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
  // cvb0: exactly its default 5 sweeps per document (tolerance 0).
  auto m =
      Model::Create(*fam, *loss, *schema, {{"topics", std::to_string(K)}, {"inference", inference}, {"cvb0_tol", "0"}});
  if (!m.ok()) {
    state.SkipWithError(m.status().ToString().c_str());
    return;
  }
  (*m)->learner_state().effective_size = 1e5;
  (void)(*m)->Rebuild(trib_step{0.0, 1e5, 0.0, 0});
  auto learner = SdemLearner::Create(m->get());
  auto docs = Docs(distinct, 256);
  // The first step (rho_0 = 1) re-materialises the whole block, O(V K): once,
  // before the timing.
  if (Status st = (*learner)->Learn(docs[0].View()); !st.ok()) state.SkipWithError(st.ToString().c_str());
  size_t i = 1;
  for (auto _ : state) {
    Status st = (*learner)->Learn(docs[i++ % docs.size()].View());
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["ns_per_term_topic"] = benchmark::Counter(static_cast<double>(state.iterations()) * distinct * K,
                                                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

const char* const kInferenceNames[] = {"cvb0", "vi", "fast"};

// args: vocabulary, inference (0 cvb0, 1 vi, 2 fast)
void BM_LdaStepVsVocabulary(benchmark::State& state) {
  Step(state, static_cast<uint64_t>(state.range(0)), 20, 100, kInferenceNames[state.range(1)]);
}
BENCHMARK(BM_LdaStepVsVocabulary)->ArgsProduct({{1000, 100000, 1000000}, {0, 1, 2}});

// args: distinct terms, topics, inference (0 cvb0, 1 vi, 2 fast)
void BM_LdaStepVsLengthAndTopics(benchmark::State& state) {
  Step(state, 100000, static_cast<uint32_t>(state.range(1)), static_cast<uint32_t>(state.range(0)),
       kInferenceNames[state.range(2)]);
}
BENCHMARK(BM_LdaStepVsLengthAndTopics)->ArgsProduct({{25, 100, 400}, {10, 20, 40}, {0, 1, 2}});

// ---- Synthetic recovery at the size -------------------------------------

// K = 10 topics ~ Dir(0.1) over 1,000 terms, theta ~ Dir(0.1), 100 tokens per
// document; args: model seed, documents D (n = D), inference (0 cvb0, 1 vi,
// 2 gibbs), tau0 (0: the default rho_t = 1/(1+t), else (tau0 + t)^-kappa),
// 100 kappa. Reports the mean matched L1 after 1,000, 5,000 and D documents.
void BM_LdaRecovery(benchmark::State& state) {
  const uint64_t seed = static_cast<uint64_t>(state.range(0));
  const size_t D = static_cast<size_t>(state.range(1));
  static const char* const kInference[] = {"cvb0", "vi", "gibbs"};
  const char* inference = kInference[state.range(2)];
  static const lda::SyntheticCorpus corpus = lda::GenerateLda(11, 10, 1000, 100, 20000);
  std::vector<DocumentBuffer> docs(D);
  for (size_t i = 0; i < D; ++i) {
    docs[i].index = i;
    docs[i].term_ids = corpus.docs[i].term_ids;
    docs[i].term_counts = corpus.docs[i].term_counts;
  }
  v1::Schema proto;
  proto.set_hashed_dim(corpus.V);
  proto.add_class_names("c0");
  auto schema = ModelSchema::FromProto(proto);
  auto fam = Registry().Find("lda", TRIB_KIND_FAMILY);
  auto loss = Registry().Find("nll", TRIB_KIND_LOSS);
  Options opts = {{"topics", "10"}, {"inference", inference}};
  for (auto _ : state) {
    auto m = Model::Create(*fam, *loss, *schema, opts, seed);
    if (!m.ok()) {
      state.SkipWithError(m.status().ToString().c_str());
      return;
    }
    LearnerState& ls = (*m)->learner_state();
    if (state.range(3) > 0) {
      ls.schedule.kind = StepSchedule::Kind::kPolynomial;
      ls.schedule.tau0 = static_cast<double>(state.range(3));
      ls.schedule.kappa = static_cast<double>(state.range(4)) / 100.0;
    }
    ls.effective_size = static_cast<double>(D);
    (void)(*m)->Rebuild(trib_step{0.0, static_cast<double>(D), 0.0, 0});
    auto learner = SdemLearner::Create(m->get(), seed);
    double secs = 0;
    for (size_t i = 0; i < D; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      Status st = (*learner)->Learn(docs[i].View());
      secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!st.ok()) {
        state.SkipWithError(st.ToString().c_str());
        return;
      }
      if (i + 1 == 1000 || i + 1 == 5000 || i + 1 == D) {
        std::vector<std::vector<double>> learned((*m)->num_outputs());
        for (uint32_t k = 0; k < learned.size(); ++k) (void)(*m)->ComponentTerms(k, &learned[k]);
        state.counters["L1_" + std::to_string(i + 1)] = lda::MeanMatchedL1(learned, corpus);
      }
    }
    state.counters["docs_per_s"] = static_cast<double>(D) / secs;
  }
}
// The recommended schedule rho_t = (256 + t)^-0.7: CVB0 for 32 model seeds,
// VI and Gibbs for 4; then CVB0 under the program's default rho_t = 1/(1+t).
BENCHMARK(BM_LdaRecovery)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int64_t seed = 1; seed <= 32; ++seed) b->Args({seed, 20000, 0, 256, 70});
      for (int64_t inference : {1, 2}) {
        for (int64_t seed = 1; seed <= 4; ++seed) b->Args({seed, 20000, inference, 256, 70});
      }
      for (int64_t seed = 1; seed <= 4; ++seed) b->Args({seed, 20000, 0, 0, 0});
    })
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace tributary

BENCHMARK_MAIN();
