// Google Benchmark kernels for multinomial naive Bayes (K = 45 classes,
// documents of 8-12 terms, vocabularies of 10k and 1M terms):
//   BM_MnbScore     one Model::Score call (prediction: log p(k, x) for all k)
//   BM_MnbPredictFrozen  the same through a Predictor's frozen table (ABI 1.6)
//   BM_SdemLearn    one SdemLearner::Learn step (score, loss weights,
//                   accumulate, lazy update, commit) for nll / ncll / hinge
//   BM_LivePredict  LiveModel::Reader::Predict (live_model.h) on 1 and 2
//                   reader threads while a learner thread learns (NCLL) the
//                   whole time: documents/s summed over the readers (real
//                   time), and the learner's documents/s meanwhile
// Documents come from a fixed-seed generator shaped like
// bench/gen_synthetic.py; each benchmark cycles through 2^16 of them, so at
// 1M terms the touched rows do not fit in the caches (as in a real stream).
//
// Plugins are the build's built-in ones, or those in the directory named by
// $TRIBUTARY_BENCH_PLUGIN_DIR (e.g. an older build's plugin directory, to
// compare two versions of a family in one run).
//
// Benchmarks, not tests: nothing here is run by ctest.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tributary/document.h"
#include "tributary/live_model.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/predictor.h"
#include "tributary/sdem_learner.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

constexpr uint32_t kClasses = 45;
constexpr size_t kRing = size_t{1} << 16;
constexpr double kEffectiveSize = 200000;  // n, as `train` sets it for a 200k-document stream

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "mnb_bench: %s\n", what.c_str());
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

std::shared_ptr<const Plugin> Find(const std::string& name, trib_plugin_kind kind) {
  auto r = Registry().Find(name, kind);
  if (!r.ok()) Die(r.status().ToString());
  return *r;
}

// Like bench/gen_synthetic.py: uniform labels, 8-12 tokens, each from the
// class's 200 topic words with probability 0.4, else uniform over V. With
// `counts`, 15% of the tokens get a count of 2 to 8 (mostly 2), like the term
// counts of real short documents (fortunes: 15% of the entries are > 1).
std::vector<DocumentBuffer> MakeDocs(uint64_t V, size_t n, uint64_t seed, bool counts) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint64_t>> topic(kClasses, std::vector<uint64_t>(200));
  for (auto& t : topic)
    for (auto& w : t) w = rng() % V;
  std::vector<DocumentBuffer> docs(n);
  for (size_t i = 0; i < n; ++i) {
    DocumentBuffer& d = docs[i];
    const uint32_t k = static_cast<uint32_t>(rng() % kClasses);
    d.index = i;
    d.label = k;
    const uint32_t len = 8 + static_cast<uint32_t>(rng() % 5);
    for (uint32_t j = 0; j < len; ++j) {
      const uint64_t w = (rng() % 10 < 4) ? topic[k][rng() % 200] : rng() % V;
      d.term_ids.push_back(static_cast<uint32_t>(w));
      double c = 1.0;
      if (counts && rng() % 100 < 15) {
        const uint64_t r = rng() % 10;
        c = r < 7 ? 2.0 : r < 9 ? 3.0 : static_cast<double>(4 + rng() % 5);
      }
      d.term_counts.push_back(c);
    }
    d.Canonicalize();
  }
  return docs;
}

const std::vector<DocumentBuffer>& Docs(uint64_t V, bool counts = false) {
  static std::vector<DocumentBuffer> small = MakeDocs(10000, kRing, 1, false);
  static std::vector<DocumentBuffer> large = MakeDocs(1000000, kRing, 1, false);
  static std::vector<DocumentBuffer> small_counts = MakeDocs(10000, kRing, 1, true);
  static std::vector<DocumentBuffer> large_counts = MakeDocs(1000000, kRing, 1, true);
  if (V == 10000) return counts ? small_counts : small;
  if (V == 1000000) return counts ? large_counts : large;
  Die("no documents for V = " + std::to_string(V));
}

std::unique_ptr<Model> NewModel(uint64_t V, const std::string& loss) {
  v1::Schema proto;
  proto.set_hashed_dim(V);
  for (uint32_t k = 0; k < kClasses; ++k) proto.add_class_names("c" + std::to_string(k));
  auto schema = ModelSchema::FromProto(proto);
  if (!schema.ok()) Die(schema.status().ToString());
  auto m = Model::Create(Find("multinomial", TRIB_KIND_FAMILY), Find(loss, TRIB_KIND_LOSS), *schema, {});
  if (!m.ok()) Die(m.status().ToString());
  (*m)->learner_state().effective_size = kEffectiveSize;
  return std::move(m).value();
}

// max_k |a_k - b_k| / |b_k| against a dense std::log reference,
//   log C_k - log sum_j C_j - |x| log M_k + sum_w n_w log N_wk,   M_k = sum_w N_wk
// (everything recomputed from the statistics mu, so it also measures the drift
// of the family's incremental totals).
double MaxRelDiffVsReference(const Model& m, const std::vector<DocumentBuffer>& docs, size_t count) {
  const auto& st = m.stats();
  const uint64_t V = m.schema().vocab_size();
  double ctot = 0;
  std::vector<double> mk(kClasses, 0.0);
  for (uint32_t k = 0; k < kClasses; ++k) ctot += st.Mu(k);
  const trib_block& wb = st.blocks()[1];
  for (uint64_t w = 0; w < V; ++w)
    for (uint32_t k = 0; k < kClasses; ++k)
      mk[k] += wb.scale * st.raw()[kClasses + w * kClasses + k] + wb.shift * wb.alpha_bar;
  auto state = m.NewScoringState();
  if (!state.ok()) Die(state.status().ToString());
  std::vector<double> got(kClasses);
  double worst = 0;
  for (size_t i = 0; i < count; ++i) {
    const DocumentBuffer& d = docs[i];
    Status s = m.Score(d.View(), state->get(), got.data());
    if (!s.ok()) Die(s.ToString());
    for (uint32_t k = 0; k < kClasses; ++k) {
      double want = std::log(st.Mu(k)) - std::log(ctot) - d.TotalCount() * std::log(mk[k]);
      for (size_t j = 0; j < d.term_ids.size(); ++j)
        want += d.term_counts[j] * std::log(st.Mu(kClasses + uint64_t{d.term_ids[j]} * kClasses + k));
      worst = std::max(worst, std::fabs(got[k] - want) / std::fabs(want));
    }
  }
  return worst;
}

// A model trained (NCLL) on 20,000 of the documents.
std::unique_ptr<Model> TrainedModel(uint64_t V, const std::vector<DocumentBuffer>& docs) {
  auto model = NewModel(V, "ncll");
  auto learner = SdemLearner::Create(model.get());
  if (!learner.ok()) Die(learner.status().ToString());
  for (size_t i = 0; i < 20000; ++i) {
    Status s = (*learner)->Learn(docs[(kRing - 1 - i) % kRing].View());
    if (!s.ok()) Die(s.ToString());
  }
  return model;
}

// Prediction: log p(k, x) for the 45 classes of a model trained (NCLL) on
// 20,000 documents. Second argument: 1 for documents with repeated terms.
void BM_MnbScore(benchmark::State& state) {
  const uint64_t V = static_cast<uint64_t>(state.range(0));
  const auto& docs = Docs(V, state.range(1) != 0);
  auto model = TrainedModel(V, docs);
  auto scoring = model->NewScoringState();
  if (!scoring.ok()) Die(scoring.status().ToString());
  std::vector<double> out(kClasses);
  size_t i = 0;
  for (auto _ : state) {
    Status s = model->Score(docs[i].View(), scoring->get(), out.data());
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    i = (i + 1) % kRing;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["max_rel_diff_vs_std_log"] = MaxRelDiffVsReference(*model, docs, 1000);
}

// The same model and documents through a Predictor whose frozen table (ABI
// 1.6, what eval and predict use once a stream is long enough) is built
// before the timing: one multiply-add per (term, class), no log.
void BM_MnbPredictFrozen(benchmark::State& state) {
  const uint64_t V = static_cast<uint64_t>(state.range(0));
  const auto& docs = Docs(V, state.range(1) != 0);
  auto model = TrainedModel(V, docs);
  auto predictor = Predictor::Create(model.get());
  if (!predictor.ok()) Die(predictor.status().ToString());
  if (Status st = (*predictor)->Freeze(); !st.ok() || !(*predictor)->frozen()) Die("no frozen table: " + st.ToString());
  std::vector<double> out(kClasses);
  size_t i = 0;
  for (auto _ : state) {
    Status s = (*predictor)->Score(docs[i].View(), out.data());
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    i = (i + 1) % kRing;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// One sdEM step per iteration, streaming through the documents.
void BM_SdemLearn(benchmark::State& state, const std::string& loss) {
  const uint64_t V = static_cast<uint64_t>(state.range(0));
  const auto& docs = Docs(V, state.range(1) != 0);
  auto model = NewModel(V, loss);
  auto learner = SdemLearner::Create(model.get());
  if (!learner.ok()) Die(learner.status().ToString());
  size_t i = 0;
  for (auto _ : state) {
    Status s = (*learner)->Learn(docs[i].View());
    if (!s.ok()) Die(s.ToString());
    i = (i + 1) % kRing;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.counters["max_rel_diff_vs_std_log"] = MaxRelDiffVsReference(*model, docs, 200);
}

// The server's publication of the learner's model to its predictors, every
// 100 NCLL documents: a Clone (mode 0, what Publish did before) against
// refreshing the copy published two publications ago (mode 1,
// Model::RefreshFrom: only the statistics pages written since). Only the
// publication is timed; "pages" is the pages a refresh copied.
void BM_Publish(benchmark::State& state) {
  const uint64_t V = static_cast<uint64_t>(state.range(0));
  const bool refresh = state.range(1) != 0;
  const auto& docs = Docs(V, true);
  auto model = NewModel(V, "ncll");
  auto learner = SdemLearner::Create(model.get());
  if (!learner.ok()) Die(learner.status().ToString());
  size_t i = 0;
  auto learn = [&](int n) {
    for (int j = 0; j < n; ++j, i = (i + 1) % kRing) {
      Status s = (*learner)->Learn(docs[i].View());
      if (!s.ok()) Die(s.ToString());
    }
  };
  learn(20000);
  // Two copies, as the server keeps: the published one and the retired one.
  std::unique_ptr<Model> copies[2];
  uint64_t made_at[2] = {0, 0};
  for (int c = 0; c < 2; ++c) {
    auto m = model->Clone();
    if (!m.ok()) Die(m.status().ToString());
    copies[c] = std::move(m).value();
    made_at[c] = model->stats().epoch();
    model->stats().NextEpoch();
  }
  int next = 0;
  double pages = 0;
  for (auto _ : state) {
    state.PauseTiming();
    learn(100);
    const uint64_t since = made_at[next];
    pages += static_cast<double>(model->stats().PagesWrittenSince(since));
    state.ResumeTiming();
    if (refresh) {
      Status s = copies[next]->RefreshFrom(*model, since);
      if (!s.ok()) Die(s.ToString());
    } else {
      auto m = model->Clone();
      if (!m.ok()) Die(m.status().ToString());
      copies[next] = std::move(m).value();
    }
    made_at[next] = model->stats().epoch();
    model->stats().NextEpoch();
    next ^= 1;
  }
  state.counters["pages"] = pages / static_cast<double>(state.iterations());
  state.counters["total_pages"] = static_cast<double>(model->stats().size() >> SufficientStats::kPageShift);
}

// With --benchmark_repetitions=N, "_min" is the least disturbed run (the
// machine may be shared), next to Google Benchmark's mean/median/stddev.
double MinOf(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

// The embedding handle: the trained model in a LiveModel (publishing every
// 256 documents); thread 0 runs a learner thread over the same documents for
// the whole timing.
struct LiveBench {
  std::unique_ptr<LiveModel> live;
  std::thread learner;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> learned{0};
  void Start(const std::vector<DocumentBuffer>& docs) {
    stop = false;
    learned = 0;
    learner = std::thread([this, &docs] {
      size_t i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        Status s = live->Learn(docs[i].View());
        if (!s.ok()) Die(s.ToString());
        i = (i + 1) % kRing;
        learned.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  void Stop() {
    stop = true;
    if (learner.joinable()) learner.join();
  }
  ~LiveBench() { Stop(); }
};

LiveBench& Live(uint64_t V) {
  static std::mutex mu;
  static std::map<uint64_t, std::unique_ptr<LiveBench>> all;
  std::lock_guard<std::mutex> l(mu);
  auto& b = all[V];
  if (!b) {
    b = std::make_unique<LiveBench>();
    auto live = LiveModel::Create(TrainedModel(V, Docs(V)), LiveModelOptions{});
    if (!live.ok()) Die(live.status().ToString());
    b->live = std::move(live).value();
  }
  return *b;
}

void BM_LivePredict(benchmark::State& state) {
  const uint64_t V = static_cast<uint64_t>(state.range(0));
  const auto& docs = Docs(V);
  LiveBench& bench = Live(V);
  auto reader = bench.live->NewReader();
  if (!reader.ok()) Die(reader.status().ToString());
  if (state.thread_index() == 0) bench.Start(docs);
  LivePrediction p;
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Status s = (*reader)->Predict(docs[i % kRing].View(), &p);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(p.scores.data());
    ++i;
  }
  if (state.thread_index() == 0) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bench.Stop();
    state.counters["learned_per_s"] = static_cast<double>(bench.learned.load()) / seconds;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

BENCHMARK(BM_MnbScore)
    ->ArgNames({"vocab", "counts"})
    ->ArgsProduct({{10000, 1000000}, {0, 1}})
    ->ComputeStatistics("min", MinOf);
BENCHMARK(BM_MnbPredictFrozen)
    ->ArgNames({"vocab", "counts"})
    ->ArgsProduct({{10000, 1000000}, {0, 1}})
    ->ComputeStatistics("min", MinOf);
BENCHMARK_CAPTURE(BM_SdemLearn, nll, std::string("nll"))
    ->ArgNames({"vocab", "counts"})
    ->ArgsProduct({{10000, 1000000}, {0, 1}})
    ->ComputeStatistics("min", MinOf);
BENCHMARK_CAPTURE(BM_SdemLearn, ncll, std::string("ncll"))
    ->ArgNames({"vocab", "counts"})
    ->ArgsProduct({{10000, 1000000}, {0, 1}})
    ->ComputeStatistics("min", MinOf);
BENCHMARK_CAPTURE(BM_SdemLearn, hinge, std::string("hinge"))
    ->ArgNames({"vocab", "counts"})
    ->ArgsProduct({{10000, 1000000}, {0, 1}})
    ->ComputeStatistics("min", MinOf);
BENCHMARK(BM_LivePredict)->ArgName("vocab")->Arg(10000)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Publish)
    ->ArgNames({"vocab", "refresh"})
    ->ArgsProduct({{10000, 1000000}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min", MinOf);

}  // namespace
}  // namespace tributary

BENCHMARK_MAIN();
