// Google Benchmark kernels for SEP on the count mixtures (emsd-mixture,
// scale fixed: the default), one SepLearner::Learn call per iteration:
//   BM_SepLearn/S/K/V/L/warm   S quadrature points (option samples), K
//                              components, vocabulary V, L distinct terms
//                              per document, `warm` documents learned
//                              before the timed loop (the stream so far)
//   BM_SepLearnNoRefresh       the same with option refresh=0 (no periodic
//                              O(K V) recomputation of the shape totals)
//   BM_SepLearnMonteCarlo      the same with option integration=montecarlo
//                              (S = 32, 100 seeded draws of s)
//   BM_EpLearn                 EP on the same documents, for comparison
//                              (same per-document work, plus one stored site
//                              per document: site_bytes_per_doc)
// The cost model of the family (plugins/emsd_mixture/count_mixture.h) is
// O(K (L + S)) special-function evaluations per document, plus the engine's
// O(support) = O(K L), plus O(V) refreshes of one component's totals when
// their error bound (a series in the rate shift and the SEP decay) exceeds
// 1e-8: O(log t) per component, i.e. an amortised O(K V / t) that vanishes
// as the stream grows, and a full O(K V) refresh every max(refresh, V)
// updates (O(K) amortised). Counters:
//   items_per_second      documents/s
//   ns_per_term_comp      CPU time per document / (L K)
//   ns_per_comp_sample    CPU time per document / (K S)
//   materializations      engine re-materialisations of a block (SEP)
//   skipped               infeasible updates skipped
//   stream_pos            documents learned when the timed loop ended
// Google Benchmark calls each benchmark more than once: the calls continue
// one warmed stream (the warm-up is paid once).
// Documents: a ring of 4096 documents with exactly L distinct terms each
// (60% from one of 10 topics of 500 terms, else uniform over V; counts
// 1 + Geometric(0.5)), fixed seed. N (effective size) = 1e6 so the SEP decay
// (1 - 1/N per document) does not force refreshes within a run.
//
// Plugins are the build's built-in ones (or $TRIBUTARY_BENCH_PLUGIN_DIR).
// Benchmarks, not tests: nothing here is run by ctest. Results:
// bench/SEP_RESULTS.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/schema.h"
#include "tributary/sep_engine.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

constexpr size_t kRing = 4096;
constexpr uint32_t kTopics = 10;
constexpr uint32_t kTopicTerms = 500;
constexpr double kEffectiveSize = 1e6;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "sep_bench: %s\n", what.c_str());
  std::exit(1);
}

const PluginRegistry& Registry() {
  static PluginRegistry* reg = [] {
    std::string dir = PluginRegistry::BuiltinPluginDir();
    if (const char* env = std::getenv("TRIBUTARY_BENCH_PLUGIN_DIR")) dir = env;
    auto* r = new PluginRegistry(std::vector<std::string>{dir}, true);
    r->Scan();
    return r;
  }();
  return *reg;
}

std::shared_ptr<const Plugin> Family(const std::string& name) {
  auto r = Registry().Find(name, TRIB_KIND_FAMILY);
  if (!r.ok()) Die(r.status().ToString());
  return *r;
}

std::vector<DocumentBuffer> MakeDocs(uint64_t V, uint32_t L, uint64_t seed) {
  if (L > V / 2) Die("L must be at most V / 2");
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint64_t>> topic(kTopics, std::vector<uint64_t>(std::min<uint64_t>(kTopicTerms, V)));
  for (auto& t : topic)
    for (auto& w : t) w = rng() % V;
  std::geometric_distribution<int> extra(0.5);
  std::vector<DocumentBuffer> docs(kRing);
  std::unordered_set<uint64_t> seen;
  for (size_t i = 0; i < kRing; ++i) {
    DocumentBuffer& d = docs[i];
    const uint32_t k = static_cast<uint32_t>(rng() % kTopics);
    d.index = i;
    d.label = k;
    seen.clear();
    while (seen.size() < L) {
      const uint64_t w = (rng() % 10 < 6) ? topic[k][rng() % topic[k].size()] : rng() % V;
      if (!seen.insert(w).second) continue;
      d.term_ids.push_back(static_cast<uint32_t>(w));
      d.term_counts.push_back(1.0 + extra(rng));
    }
    d.Canonicalize();
  }
  return docs;
}

const std::vector<DocumentBuffer>& Docs(uint64_t V, uint32_t L) {
  static std::map<std::pair<uint64_t, uint32_t>, std::vector<DocumentBuffer>> cache;
  auto it = cache.find({V, L});
  if (it == cache.end()) it = cache.emplace(std::make_pair(V, L), MakeDocs(V, L, 1)).first;
  return it->second;
}

// Family options besides components and samples.
enum Variant { kDefault = 0, kNoRefresh = 1, kMonteCarlo = 2 };

std::unique_ptr<Model> NewModel(uint64_t V, uint32_t K, uint32_t S, Variant variant) {
  v1::Schema proto;
  proto.set_hashed_dim(V);
  for (uint32_t k = 0; k < kTopics; ++k) proto.add_class_names("c" + std::to_string(k));
  auto schema = ModelSchema::FromProto(proto);
  if (!schema.ok()) Die(schema.status().ToString());
  Options opts = {{"components", std::to_string(K)}, {"samples", std::to_string(S)}};
  if (variant == kNoRefresh) opts.emplace_back("refresh", "0");
  if (variant == kMonteCarlo) opts.emplace_back("integration", "montecarlo");
  auto m = Model::Create(Family("emsd-mixture"), nullptr, *schema, opts, 1);
  if (!m.ok()) Die(m.status().ToString());
  return std::move(m).value();
}

std::unique_ptr<SepLearner> NewLearner(Model* m, SepEngine engine) {
  SepOptions o;
  o.engine = engine;
  o.effective_size = kEffectiveSize;
  auto l = SepLearner::Create(m, o);
  if (!l.ok()) Die(l.status().ToString());
  return std::move(l).value();
}

void LearnOne(SepLearner* l, const DocumentBuffer& d, uint64_t index) {
  trib_document v = d.View();
  v.index = index;
  Status s = l->Learn(v);
  if (!s.ok()) Die(s.ToString());
}

// CPU time of this thread (Google Benchmark's items_per_second is per CPU
// second too; the machine may be shared).
double ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// The warmed model of the last benchmark run: Google Benchmark calls a
// benchmark function more than once (to size the iteration count); the
// later calls continue the same stream instead of warming up again.
struct Warmed {
  std::vector<int64_t> key;
  std::unique_ptr<Model> model;
  std::unique_ptr<SepLearner> learner;
  uint64_t t = 0;
};

Warmed& Warm(const std::vector<int64_t>& key, uint64_t V, uint32_t K, uint32_t S, uint32_t L, uint64_t warm,
             SepEngine engine, Variant variant) {
  static Warmed w;
  if (w.key == key && w.learner) return w;
  w.learner.reset();
  w.model.reset();
  w.key = key;
  w.model = NewModel(V, K, S, variant);
  w.learner = NewLearner(w.model.get(), engine);
  const auto& docs = Docs(V, L);
  for (w.t = 0; w.t < warm; ++w.t) LearnOne(w.learner.get(), docs[w.t % kRing], w.t);
  return w;
}

void Run(benchmark::State& state, SepEngine engine, Variant variant) {
  const uint32_t S = static_cast<uint32_t>(state.range(0));
  const uint32_t K = static_cast<uint32_t>(state.range(1));
  const uint64_t V = static_cast<uint64_t>(state.range(2));
  const uint32_t L = static_cast<uint32_t>(state.range(3));
  const uint64_t warm = static_cast<uint64_t>(state.range(4));
  const auto& docs = Docs(V, L);
  Warmed& w = Warm({state.range(0), state.range(1), state.range(2), state.range(3), state.range(4),
                    static_cast<int64_t>(engine), static_cast<int64_t>(variant)},
                   V, K, S, L, warm, engine, variant);
  SepLearner* learner = w.learner.get();
  const SepCounters before = learner->counters();
  const size_t sites_before = learner->SiteBytes();
  const double start = ThreadCpuNs();
  for (auto _ : state) {
    LearnOne(learner, docs[w.t % kRing], w.t);
    ++w.t;
  }
  const double ns = ThreadCpuNs() - start;
  const SepCounters& c = learner->counters();
  const double iters = std::max(1.0, static_cast<double>(state.iterations()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["ns_per_term_comp"] = ns / iters / (static_cast<double>(L) * K);
  state.counters["ns_per_comp_sample"] = ns / iters / (static_cast<double>(K) * S);
  state.counters["materializations"] = static_cast<double>(c.materializations - before.materializations);
  state.counters["skipped"] = static_cast<double>(c.skipped_infeasible - before.skipped_infeasible);
  state.counters["stream_pos"] = static_cast<double>(w.t);
  if (engine == SepEngine::kEp) {
    state.counters["site_bytes_per_doc"] = static_cast<double>(learner->SiteBytes() - sites_before) / iters;
  }
}

void BM_SepLearn(benchmark::State& state) { Run(state, SepEngine::kSep, kDefault); }
void BM_SepLearnNoRefresh(benchmark::State& state) { Run(state, SepEngine::kSep, kNoRefresh); }
void BM_SepLearnMonteCarlo(benchmark::State& state) { Run(state, SepEngine::kSep, kMonteCarlo); }
void BM_EpLearn(benchmark::State& state) { Run(state, SepEngine::kEp, kDefault); }

// Arguments: S, K, V, L, warm. The reference point is S=32 K=10 V=10^4
// L=50 warm=2000; each group varies one of them.
void Sweeps(benchmark::internal::Benchmark* b) {
  b->ArgNames({"S", "K", "V", "L", "warm"});
  for (int64_t S : {2, 8, 32, 128, 512}) b->Args({S, 10, 10000, 50, 2000});
  for (int64_t K : {2, 5, 20, 50}) b->Args({32, K, 10000, 50, 2000});
  for (int64_t L : {10, 25, 100, 200}) b->Args({32, 10, 10000, L, 2000});
  for (int64_t V : {1000, 100000, 1000000}) b->Args({32, 10, V, 50, 2000});
  for (int64_t V : {1000, 100000, 1000000}) b->Args({32, 10, V, 50, 20000});
  for (int64_t warm : {0, 20000, 100000}) b->Args({32, 10, 10000, 50, warm});
  b->Unit(benchmark::kMicrosecond);
}

void VocabSweep(benchmark::internal::Benchmark* b) {
  b->ArgNames({"S", "K", "V", "L", "warm"});
  for (int64_t warm : {2000, 20000})
    for (int64_t V : {1000, 10000, 100000, 1000000}) b->Args({32, 10, V, 50, warm});
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_SepLearn)->Apply(Sweeps);
BENCHMARK(BM_SepLearnNoRefresh)->Apply(VocabSweep);
// integration=montecarlo: S seeded draws of s instead of S quadrature points.
BENCHMARK(BM_SepLearnMonteCarlo)
    ->ArgNames({"S", "K", "V", "L", "warm"})
    ->Args({32, 10, 10000, 50, 2000})
    ->Args({100, 10, 10000, 50, 2000})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EpLearn)
    ->ArgNames({"S", "K", "V", "L", "warm"})
    ->Args({32, 10, 10000, 50, 2000})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tributary

BENCHMARK_MAIN();
