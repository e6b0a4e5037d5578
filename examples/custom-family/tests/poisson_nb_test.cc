// Unit tests of the poisson-nb family, without Tributary's engine and without
// dlopen(): the test program is linked with the plugin's code and calls its
// vtable through tributary_plugin_init, as the host would.
//
// MiniHost below is a small, dense stand-in for the engine's per-document
// step (sdEM Algorithm 1 with Table 1's update, the lazy per-block map
// mu = scale * raw + shift * abar and the check-step), written from the
// contract in plugin_abi.h. It is enough to test a family in isolation.
#include <gtest/gtest.h>
#include <math.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tributary/plugin_abi.h"

extern "C" {
extern const trib_plugin_info tributary_plugin_info;
int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out, trib_error* err);
}

namespace {

double TestLgamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);  // reentrant, unlike std::lgamma
}
double TestDigamma(double) { return NAN; }  // poisson-nb does not use it

// poisson-nb uses none of the ABI 1.4 functions (trigamma, erf_inv).
const trib_host_api kHost = {sizeof(trib_host_api), TRIB_ABI_MAJOR, TRIB_ABI_MINOR, &TestLgamma,
                             &TestDigamma,          nullptr,        nullptr};

trib_family_vtable Vtable() {
  trib_plugin_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  trib_error err{};
  EXPECT_EQ(tributary_plugin_init(&kHost, &vt, &err), TRIB_OK) << err.message;
  return vt.family;
}

// A document owning its arrays.
struct Doc {
  std::vector<uint32_t> ids;
  std::vector<double> counts;
  int64_t label = -1;
  trib_document View() const {
    trib_document d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.id = "";
    d.label = label;
    d.num_terms = static_cast<uint32_t>(ids.size());
    d.term_ids = ids.data();
    d.term_counts = counts.data();
    for (double c : counts) d.total_count += c;
    d.weight = 1.0;
    return d;
  }
};

// ---- Losses (the three built-in ones, Table 1) ------------------------------------------

enum class Loss { kNll, kNcll, kHinge };

void Weights(Loss loss, const std::vector<double>& s, int64_t y, std::vector<double>* w, double* c) {
  const size_t K = s.size();
  w->assign(K, 0.0);
  *c = 0.0;
  if (loss == Loss::kNll) {
    (*w)[y] = 1.0;
    *c = 1.0;
  } else if (loss == Loss::kNcll) {
    const double m = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double v : s) z += std::exp(v - m);
    for (size_t k = 0; k < K; ++k) (*w)[k] = -std::exp(s[k] - m) / z;
    (*w)[y] += 1.0;
  } else {
    int64_t ybar = -1;
    for (size_t k = 0; k < K; ++k)
      if (static_cast<int64_t>(k) != y && (ybar < 0 || s[k] > s[ybar])) ybar = static_cast<int64_t>(k);
    if (s[y] - s[ybar] <= 1.0) {
      (*w)[y] = 1.0;
      (*w)[ybar] = -1.0;
    }
  }
}

// ---- A dense stand-in for the engine ----------------------------------------------------

class MiniHost {
 public:
  MiniHost(uint64_t vocab, uint32_t classes, std::vector<trib_option> options = {}) : v_(Vtable()) {
    schema_.struct_size = sizeof schema_;
    schema_.vocab_size = vocab;
    schema_.num_classes = classes;
    trib_error err{};
    rc_ = v_.create(&schema_, options.data(), options.size(), &model_, &err);
    if (rc_ != TRIB_OK) {
      message_ = err.message;
      return;
    }
    uint32_t nb = 0;
    EXPECT_EQ(v_.layout(model_, nullptr, &nb, &err), TRIB_OK);
    blocks_.resize(nb);
    EXPECT_EQ(v_.layout(model_, blocks_.data(), &nb, &err), TRIB_OK);
    uint64_t size = 0;
    for (auto& b : blocks_) {
      b.scale = 1.0;  // mu_0 = abar (Algorithm 1, line 1)
      b.shift = 1.0;
      size += b.size;
    }
    raw_.assign(size, 0.0);
    trib_stats s = View();
    trib_step step{0.0, 1.0, 0.0, 0};
    EXPECT_EQ(v_.rebuild(model_, &s, &step, &err), TRIB_OK) << err.message;
    EXPECT_EQ(v_.state_create(model_, 1, &state_, &err), TRIB_OK);
  }
  ~MiniHost() {
    if (state_) v_.state_destroy(state_);
    if (model_) v_.destroy(model_);
  }
  MiniHost(const MiniHost&) = delete;
  MiniHost& operator=(const MiniHost&) = delete;

  int create_rc() const { return rc_; }
  const std::string& create_message() const { return message_; }
  const trib_family_vtable& vtable() const { return v_; }
  trib_family_model* model() { return model_; }
  std::vector<double>& raw() { return raw_; }
  std::vector<trib_block>& blocks() { return blocks_; }
  uint32_t K() const { return schema_.num_classes; }
  uint64_t V() const { return schema_.vocab_size; }

  trib_stats View() {
    return trib_stats{raw_.data(), raw_.size(), static_cast<uint32_t>(blocks_.size()), blocks_.data()};
  }

  uint32_t BlockOf(uint64_t i) const {
    for (uint32_t b = 0; b < blocks_.size(); ++b)
      if (i >= blocks_[b].offset && i < blocks_[b].offset + blocks_[b].size) return b;
    ADD_FAILURE() << "index " << i << " outside every block";
    return 0;
  }
  double Mu(uint64_t i) const {
    const trib_block& b = blocks_[BlockOf(i)];
    return b.scale * raw_[i] + b.shift * b.alpha_bar;
  }
  double N(uint32_t k) const { return Mu(k); }
  double X(uint64_t w, uint32_t k) const { return Mu(K() + w * K() + k); }

  std::vector<double> Score(const Doc& doc, trib_family_state* state = nullptr) {
    std::vector<double> out(K());
    trib_document d = doc.View();
    trib_stats s = View();
    trib_error err{};
    EXPECT_EQ(v_.score(model_, &s, state ? state : state_, &d, out.data(), &err), TRIB_OK) << err.message;
    return out;
  }

  // log p(k, x) straight from mu, O(vocabulary): the reference for Score().
  std::vector<double> ReferenceScore(const Doc& doc) const {
    std::vector<double> out(K());
    double total = 0;
    for (uint32_t k = 0; k < K(); ++k) total += N(k);
    for (uint32_t k = 0; k < K(); ++k) {
      double s = std::log(N(k) / total);
      for (uint64_t w = 0; w < V(); ++w) s -= X(w, k) / N(k);
      for (size_t j = 0; j < doc.ids.size(); ++j) {
        const double x = doc.counts[j];
        s += x * std::log(X(doc.ids[j], k) / N(k)) - std::lgamma(x + 1);
      }
      out[k] = s;
    }
    return out;
  }

  // One sdEM step on `doc` with the given weights and self-weight.
  int Step(const Doc& doc, const std::vector<double>& w, double c, double rho, double n, trib_error* err) {
    trib_document d = doc.View();
    trib_stats s = View();
    idx_.resize(16);
    val_.resize(16);
    trib_delta delta{idx_.data(), val_.data(), 0, idx_.size(), this, &Grow};
    int rc = v_.accumulate(model_, &s, state_, &d, w.data(), &delta, err);
    if (rc != TRIB_OK) return rc;
    last_delta_.assign(delta.index, delta.index + delta.size);
    // The lazy decay and prior term: mu <- f mu + rho abar / n per block.
    bool materialized = false;
    for (auto& b : blocks_) {
      const double f = 1.0 - rho * (c + b.nu / n);
      if (f <= 0) {  // fold mu into raw and restart the map (the engine's rare path)
        for (uint64_t i = b.offset; i < b.offset + b.size; ++i)
          raw_[i] = f * (b.scale * raw_[i] + b.shift * b.alpha_bar);
        b.scale = 1.0;
        b.shift = rho / n;
        materialized = true;
      } else {
        b.scale *= f;
        b.shift = b.shift * f + rho / n;
      }
    }
    // raw += rho * delta / scale.
    std::vector<double> old(delta.size);
    for (size_t j = 0; j < delta.size; ++j) {
      const uint64_t i = delta.index[j];
      old[j] = raw_[i];
      raw_[i] += rho * delta.value[j] / blocks_[BlockOf(i)].scale;
    }
    trib_step step{rho, n, c, updates_++};
    s = View();
    if (materialized) return v_.rebuild(model_, &s, &step, err);
    return v_.commit(model_, &s, delta.index, old.data(), delta.size, &step, err);
  }

  // A step with one of the three losses; returns the family's return code.
  int Learn(const Doc& doc, Loss loss, double rho, double n) {
    std::vector<double> w;
    double c = 0;
    Weights(loss, Score(doc), doc.label, &w, &c);
    trib_error err{};
    int rc = Step(doc, w, c, rho, n, &err);
    EXPECT_EQ(rc, TRIB_OK) << err.message;
    return rc;
  }

  const std::vector<uint64_t>& last_delta() const { return last_delta_; }

 private:
  static int Grow(trib_delta* d, size_t min_capacity) {
    auto* self = static_cast<MiniHost*>(d->host);
    const size_t cap = std::max(min_capacity, 2 * d->capacity);
    self->idx_.resize(cap);
    self->val_.resize(cap);
    d->index = self->idx_.data();
    d->value = self->val_.data();
    d->capacity = cap;
    return 0;
  }

  trib_family_vtable v_;
  trib_schema schema_{};
  trib_family_model* model_ = nullptr;
  trib_family_state* state_ = nullptr;
  std::vector<trib_block> blocks_;
  std::vector<double> raw_;
  std::vector<uint64_t> idx_;
  std::vector<double> val_;
  std::vector<uint64_t> last_delta_;
  uint64_t updates_ = 0;
  int rc_ = TRIB_OK;
  std::string message_;
};

void ExpectNear(const std::vector<double>& a, const std::vector<double>& b, double rel) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(std::isfinite(a[k])) << "class " << k;
    EXPECT_NEAR(a[k], b[k], rel * std::max(1.0, std::fabs(b[k]))) << "class " << k;
  }
}

// Synthetic Poisson naive Bayes data: each class has its own rates.
std::vector<Doc> Synthetic(uint32_t K, uint32_t V, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<double>> rate(K, std::vector<double>(V));
  for (uint32_t k = 0; k < K; ++k)
    for (uint32_t w = 0; w < V; ++w) rate[k][w] = (w % K == k) ? 2.0 : 0.3;
  std::vector<Doc> docs;
  for (size_t i = 0; i < n; ++i) {
    Doc d;
    d.label = static_cast<int64_t>(i % K);
    for (uint32_t w = 0; w < V; ++w) {
      std::poisson_distribution<int> pois(rate[d.label][w]);
      int x = pois(rng);
      if (x > 0) {
        d.ids.push_back(w);
        d.counts.push_back(x);
      }
    }
    if (d.ids.empty()) {
      d.ids.push_back(0);
      d.counts.push_back(1);
    }
    docs.push_back(d);
  }
  return docs;
}

// ---- Tests ------------------------------------------------------------------------------

TEST(PoissonNb, InfoAndInit) {
  EXPECT_EQ(tributary_plugin_info.magic, TRIB_PLUGIN_MAGIC);
  EXPECT_EQ(tributary_plugin_info.abi_major, TRIB_ABI_MAJOR);
  EXPECT_EQ(tributary_plugin_info.abi_minor, TRIB_ABI_MINOR);
  EXPECT_EQ(tributary_plugin_info.kind, static_cast<uint32_t>(TRIB_KIND_FAMILY));
  EXPECT_STREQ(tributary_plugin_info.name, "poisson-nb");
  EXPECT_NE(tributary_plugin_info.version, nullptr);

  trib_family_vtable v = Vtable();
  EXPECT_EQ(v.struct_size, sizeof(trib_family_vtable));
  for (auto fn :
       {(void*)v.create, (void*)v.destroy, (void*)v.clone, (void*)v.layout, (void*)v.rebuild, (void*)v.state_create,
        (void*)v.state_destroy, (void*)v.score, (void*)v.accumulate, (void*)v.commit, (void*)v.grow_classes}) {
    EXPECT_NE(fn, nullptr);
  }
  EXPECT_EQ(v.init_stats, nullptr);
  EXPECT_EQ(v.perplexity_tokens, nullptr);

  // A host with another major version is refused with a message.
  trib_host_api other = kHost;
  other.abi_major = TRIB_ABI_MAJOR + 1;
  trib_plugin_vtable vt;
  trib_error err{};
  EXPECT_EQ(tributary_plugin_init(&other, &vt, &err), TRIB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err.message).find("ABI"), std::string::npos) << err.message;
  // Restore the global host for the other tests.
  Vtable();
}

TEST(PoissonNb, UnknownAndBadOptionsAreRefused) {
  {
    std::vector<trib_option> opts{{"smoothing", "1"}};
    MiniHost h(4, 2, opts);
    EXPECT_EQ(h.create_rc(), TRIB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(h.create_message().find("'smoothing'"), std::string::npos) << h.create_message();
  }
  for (const char* bad : {"0", "-1", "abc", "", "inf", "nan", "1e300"}) {
    std::vector<trib_option> opts{{"prior", bad}};
    MiniHost h(4, 2, opts);
    EXPECT_EQ(h.create_rc(), TRIB_ERR_INVALID_ARGUMENT) << "prior=" << bad;
    EXPECT_NE(h.create_message().find("prior"), std::string::npos) << h.create_message();
  }
  {
    std::vector<trib_option> opts{{"prior_docs", "0"}};
    MiniHost h(4, 2, opts);
    EXPECT_EQ(h.create_rc(), TRIB_ERR_INVALID_ARGUMENT);
  }
  {
    MiniHost h(0, 2);  // no vocabulary (e.g. a schema of real features only)
    EXPECT_EQ(h.create_rc(), TRIB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(h.create_message().find("vocabulary"), std::string::npos) << h.create_message();
  }
}

TEST(PoissonNb, LayoutAndPrior) {
  std::vector<trib_option> opts{{"prior", "0.5"}, {"prior_docs", "2"}};
  MiniHost h(3, 2, opts);
  ASSERT_EQ(h.create_rc(), TRIB_OK) << h.create_message();
  ASSERT_EQ(h.blocks().size(), 2u);
  EXPECT_EQ(h.blocks()[0].offset, 0u);
  EXPECT_EQ(h.blocks()[0].size, 2u);
  EXPECT_EQ(h.blocks()[0].nu, 0.0);
  EXPECT_EQ(h.blocks()[0].alpha_bar, 2.0);
  EXPECT_EQ(h.blocks()[1].offset, 2u);
  EXPECT_EQ(h.blocks()[1].size, 6u);
  EXPECT_EQ(h.blocks()[1].nu, 0.0);
  EXPECT_EQ(h.blocks()[1].alpha_bar, 0.5);
}

TEST(PoissonNb, ScoreAtThePriorMatchesTheFormula) {
  std::vector<trib_option> opts{{"prior", "0.5"}, {"prior_docs", "2"}};
  MiniHost h(3, 2, opts);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  Doc d{{0, 2}, {2, 1}, -1};
  // mu_0 = abar: pi = 1/2, every lambda = a/b = 0.25, Lambda = 3 * 0.25.
  const double lam = 0.25;
  const double expect = std::log(0.5) - 3 * lam + 2 * std::log(lam) + std::log(lam) - std::log(2.0);
  auto s = h.Score(d);
  EXPECT_NEAR(s[0], expect, 1e-12);
  EXPECT_NEAR(s[1], expect, 1e-12);
}

TEST(PoissonNb, AccumulateWritesWeightedStatistics) {
  MiniHost h(4, 3);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  Doc d{{1, 3}, {2, 5}, 0};
  trib_document dv = d.View();
  trib_stats s = h.View();
  std::vector<uint64_t> idx(2);  // deliberately small: exercises delta->grow
  std::vector<double> val(2);
  struct Buf {
    std::vector<uint64_t>* idx;
    std::vector<double>* val;
  } buf{&idx, &val};
  auto grow = [](trib_delta* dd, size_t min_capacity) -> int {
    auto* b = static_cast<Buf*>(dd->host);
    b->idx->resize(min_capacity);
    b->val->resize(min_capacity);
    dd->index = b->idx->data();
    dd->value = b->val->data();
    dd->capacity = min_capacity;
    return 0;
  };
  trib_delta delta{idx.data(), val.data(), 0, idx.size(), &buf, grow};
  std::vector<double> w{0.75, 0.0, -0.25};
  trib_error err{};
  ASSERT_EQ(h.vtable().accumulate(h.model(), &s, nullptr, &dv, w.data(), &delta, &err), TRIB_OK);
  // N[0], N[2]; X[1][0], X[1][2]; X[3][0], X[3][2] (index K + w*K + k).
  std::vector<uint64_t> want_idx{0, 2, 3 + 3 + 0, 3 + 3 + 2, 3 + 9 + 0, 3 + 9 + 2};
  std::vector<double> want_val{0.75, -0.25, 1.5, -0.5, 3.75, -1.25};
  ASSERT_EQ(delta.size, want_idx.size());
  for (size_t j = 0; j < delta.size; ++j) {
    EXPECT_EQ(delta.index[j], want_idx[j]) << j;
    EXPECT_DOUBLE_EQ(delta.value[j], want_val[j]) << j;
  }
  // All weights zero (e.g. hinge with a margin > 1): nothing.
  delta.size = 0;
  std::vector<double> zero(3, 0.0);
  ASSERT_EQ(h.vtable().accumulate(h.model(), &s, nullptr, &dv, zero.data(), &delta, &err), TRIB_OK);
  EXPECT_EQ(delta.size, 0u);
}

// NLL with rho_t = 1/(1+t) averages the statistics: theta(mu) is the MAP
// estimate under the Dirichlet x Gamma prior (see poisson_nb.cc).
TEST(PoissonNb, NllAveragingIsTheMapEstimate) {
  const uint32_t K = 2, V = 5;
  std::vector<trib_option> opts{{"prior", "0.5"}, {"prior_docs", "2"}};
  const double a = 0.5, b = 2;
  MiniHost h(V, K, opts);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  std::vector<Doc> docs{{{0, 1}, {3, 1}, 0}, {{1, 4}, {2, 2}, 1}, {{0}, {1}, 0}, {{2, 3, 4}, {1, 1, 7}, 1},
                        {{0, 4}, {2, 2}, 0}, {{3}, {1}, 1},       {{1}, {4}, 0}};
  const double n = static_cast<double>(docs.size());
  for (size_t t = 0; t < docs.size(); ++t) {
    if (h.Learn(docs[t], Loss::kNll, 1.0 / (1.0 + static_cast<double>(t)), n) != TRIB_OK) return;
  }
  std::vector<double> nk(K, 0);
  std::vector<std::vector<double>> S(K, std::vector<double>(V, 0));
  for (const Doc& d : docs) {
    nk[d.label] += 1;
    for (size_t j = 0; j < d.ids.size(); ++j) S[d.label][d.ids[j]] += d.counts[j];
  }
  double ntot = 0;
  for (uint32_t k = 0; k < K; ++k) ntot += h.N(k);
  for (uint32_t k = 0; k < K; ++k) {
    EXPECT_NEAR(h.N(k) / ntot, (nk[k] + b) / (n + K * b), 1e-12);
    for (uint32_t w = 0; w < V; ++w) {
      EXPECT_NEAR(h.X(w, k) / h.N(k), (S[k][w] + a) / (nk[k] + b), 1e-12) << "k=" << k << " w=" << w;
    }
  }
  // The cached totals agree with the O(vocabulary) reference.
  for (const Doc& d : docs) ExpectNear(h.Score(d), h.ReferenceScore(d), 1e-12);
}

// Big steps (rho = 1, huge counts) with NCLL and hinge push the wrong
// classes' statistics far below zero: the check-step must keep every mu
// positive and at or above the prior's share, the totals consistent, and the
// scores finite.
TEST(PoissonNb, CheckStepHoldsUnderBigSteps) {
  for (Loss loss : {Loss::kNcll, Loss::kHinge}) {
    const uint32_t K = 3, V = 6;
    MiniHost h(V, K);
    ASSERT_EQ(h.create_rc(), TRIB_OK);
    std::vector<Doc> docs{{{0, 1}, {1e6, 3}, 0},     {{0, 2}, {5e5, 1}, 1},   {{5}, {1e7}, 2},
                          {{0, 1, 5}, {1, 1, 1}, 1}, {{1, 2}, {2e6, 2e6}, 2}, {{3, 4}, {1, 1e5}, 0}};
    for (int epoch = 0; epoch < 3; ++epoch) {
      for (const Doc& d : docs) {
        if (h.Learn(d, loss, /*rho=*/1.0, /*n=*/1.0) != TRIB_OK) return;
        for (uint64_t i = 0; i < h.raw().size(); ++i) {
          ASSERT_GE(h.raw()[i], 0.0) << "raw " << i;
          const trib_block& blk = h.blocks()[h.BlockOf(i)];
          ASSERT_GE(h.Mu(i), blk.shift * blk.alpha_bar) << "mu " << i;
          ASSERT_GT(h.Mu(i), 0.0) << "mu " << i;
        }
        for (const Doc& e : docs) ExpectNear(h.Score(e), h.ReferenceScore(e), 1e-9);
      }
    }
    // The incremental totals equal the ones rebuild() recomputes.
    std::vector<std::vector<double>> before;
    for (const Doc& e : docs) before.push_back(h.Score(e));
    trib_stats s = h.View();
    trib_step step{0.0, 1.0, 0.0, 0};
    trib_error err{};
    ASSERT_EQ(h.vtable().rebuild(h.model(), &s, &step, &err), TRIB_OK) << err.message;
    for (size_t i = 0; i < docs.size(); ++i) ExpectNear(h.Score(docs[i]), before[i], 1e-9);
  }
}

// rebuild() with rho = 0 (what the engine does after loading a snapshot) is a
// bit-exact no-op on feasible statistics.
TEST(PoissonNb, RebuildLeavesFeasibleStatisticsBitExact) {
  MiniHost h(20, 3);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  auto docs = Synthetic(3, 20, 60, 7);
  for (size_t t = 0; t < docs.size(); ++t) {
    if (h.Learn(docs[t], t % 2 ? Loss::kNcll : Loss::kHinge, 0.5, 60) != TRIB_OK) return;
  }
  const std::vector<double> raw = h.raw();
  const auto s0 = h.Score(docs[0]);
  trib_stats s = h.View();
  trib_step step{0.0, 60.0, 0.0, 60};
  trib_error err{};
  ASSERT_EQ(h.vtable().rebuild(h.model(), &s, &step, &err), TRIB_OK);
  EXPECT_EQ(std::memcmp(raw.data(), h.raw().data(), raw.size() * sizeof(double)), 0);
  const auto s1 = h.Score(docs[0]);
  for (size_t k = 0; k < s0.size(); ++k) EXPECT_NEAR(s0[k], s1[k], 1e-12 * std::fabs(s0[k]));
}

// rebuild() applies the check-step to every entry: infeasible statistics (a
// re-materialised block after a negative step, an edited snapshot) come back
// into the feasible set, and non-finite ones are refused.
TEST(PoissonNb, RebuildRepairsInfeasibleStatistics) {
  MiniHost h(5, 2);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  h.raw()[1] = -3.0;           // N[1]
  h.raw()[2 + 4 * 2] = -1e-3;  // X[4][0]
  h.raw()[2 + 1 * 2 + 1] = 2.5;
  trib_stats s = h.View();
  trib_step step{0.0, 1.0, 0.0, 0};
  trib_error err{};
  ASSERT_EQ(h.vtable().rebuild(h.model(), &s, &step, &err), TRIB_OK) << err.message;
  EXPECT_EQ(h.raw()[1], 0.0);
  EXPECT_EQ(h.raw()[2 + 4 * 2], 0.0);
  EXPECT_EQ(h.raw()[2 + 1 * 2 + 1], 2.5);
  Doc d{{1, 4}, {2, 1}, 0};
  ExpectNear(h.Score(d), h.ReferenceScore(d), 1e-12);
  h.raw()[3] = NAN;
  EXPECT_EQ(h.vtable().rebuild(h.model(), &s, &step, &err), TRIB_ERR_NUMERIC);
  EXPECT_NE(std::string(err.message).find("not finite"), std::string::npos) << err.message;
}

TEST(PoissonNb, CommitReportsNonFiniteStatistics) {
  MiniHost h(4, 2);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  const uint64_t i = 2 + 2 * 2 + 1;  // X[2][1]
  std::vector<uint64_t> idx{i};
  std::vector<double> old{h.raw()[i]};
  h.raw()[i] = INFINITY;
  trib_stats s = h.View();
  trib_step step{1.0, 1.0, 0.0, 0};
  trib_error err{};
  EXPECT_EQ(h.vtable().commit(h.model(), &s, idx.data(), old.data(), 1, &step, &err), TRIB_ERR_NUMERIC);
  EXPECT_NE(std::string(err.message).find("non-finite"), std::string::npos) << err.message;
  EXPECT_EQ(h.raw()[i], 0.0);  // reset to the prior level, the model stays usable
  Doc d{{2}, {1}, 0};
  ExpectNear(h.Score(d), h.ReferenceScore(d), 1e-12);
}

TEST(PoissonNb, CloneIsIndependent) {
  MiniHost h(5, 2);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  Doc d{{0, 3}, {2, 1}, 1};
  h.Learn(d, Loss::kNll, 0.5, 10);
  trib_family_model* copy = nullptr;
  trib_error err{};
  ASSERT_EQ(h.vtable().clone(h.model(), &copy, &err), TRIB_OK);
  const std::vector<double> raw = h.raw();
  const std::vector<trib_block> blocks = h.blocks();
  const auto before = h.Score(d);
  h.Learn(Doc{{1}, {9}, 0}, Loss::kNll, 0.5, 10);  // the original keeps learning
  trib_stats s{const_cast<double*>(raw.data()), raw.size(), 2, blocks.data()};
  trib_family_state* st = nullptr;
  ASSERT_EQ(h.vtable().state_create(copy, 2, &st, &err), TRIB_OK);
  std::vector<double> out(2);
  trib_document dv = d.View();
  ASSERT_EQ(h.vtable().score(copy, &s, st, &dv, out.data(), &err), TRIB_OK);
  EXPECT_EQ(out, before);
  h.vtable().state_destroy(st);
  h.vtable().destroy(copy);
}

TEST(PoissonNb, GrowClassesCopiesEveryOldClass) {
  const uint32_t V = 4;
  MiniHost h(V, 2);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  h.Learn(Doc{{0, 2}, {3, 1}, 0}, Loss::kNll, 0.5, 4);
  h.Learn(Doc{{1, 3}, {1, 2}, 1}, Loss::kNcll, 0.5, 4);
  MiniHost g(V, 3);  // the host creates the grown model and its layout ...
  ASSERT_EQ(g.create_rc(), TRIB_OK);
  for (size_t b = 0; b < 2; ++b) {  // ... with the old blocks' maps and raw 0
    g.blocks()[b].scale = h.blocks()[b].scale;
    g.blocks()[b].shift = h.blocks()[b].shift;
  }
  trib_stats os = h.View(), ns = g.View();
  trib_error err{};
  ASSERT_EQ(h.vtable().grow_classes(h.model(), &os, g.model(), &ns, &err), TRIB_OK);
  trib_step step{0.0, 4.0, 0.0, 2};
  ASSERT_EQ(g.vtable().rebuild(g.model(), &ns, &step, &err), TRIB_OK);
  for (uint32_t k = 0; k < 2; ++k) {
    EXPECT_EQ(g.N(k), h.N(k));
    for (uint32_t w = 0; w < V; ++w) EXPECT_EQ(g.X(w, k), h.X(w, k));
  }
  EXPECT_EQ(g.raw()[2], 0.0);  // the new class is at the prior level
  for (uint32_t w = 0; w < V; ++w) EXPECT_EQ(g.raw()[3 + w * 3 + 2], 0.0);
  Doc d{{0, 1, 3}, {1, 2, 1}, 2};
  ExpectNear(g.Score(d), g.ReferenceScore(d), 1e-12);
}

// score() may run on one model from several threads, each with its own state.
TEST(PoissonNb, ConcurrentScoresAgree) {
  MiniHost h(30, 4);
  ASSERT_EQ(h.create_rc(), TRIB_OK);
  auto docs = Synthetic(4, 30, 200, 3);
  for (size_t t = 0; t < docs.size(); ++t) h.Learn(docs[t], Loss::kNcll, 0.2, 200);
  std::vector<std::vector<double>> want;
  for (const Doc& d : docs) want.push_back(h.Score(d));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      trib_family_state* st = nullptr;
      trib_error err{};
      if (h.vtable().state_create(h.model(), static_cast<uint64_t>(t), &st, &err) != TRIB_OK) {
        mismatches[t] = -1;
        return;
      }
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t i = 0; i < docs.size(); ++i) {
          std::vector<double> out(4);
          trib_document dv = docs[i].View();
          trib_stats s = h.View();
          if (h.vtable().score(h.model(), &s, st, &dv, out.data(), &err) != TRIB_OK || out != want[i]) ++mismatches[t];
        }
      }
      h.vtable().state_destroy(st);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// All three losses learn a separable Poisson problem (training accuracy).
TEST(PoissonNb, EveryLossLearns) {
  const uint32_t K = 3, V = 24;
  auto train = Synthetic(K, V, 300, 11);
  auto test = Synthetic(K, V, 300, 12);
  for (Loss loss : {Loss::kNll, Loss::kNcll, Loss::kHinge}) {
    MiniHost h(V, K);
    ASSERT_EQ(h.create_rc(), TRIB_OK);
    const double lambda = loss == Loss::kNll ? 1.0 : 0.01;
    for (size_t t = 0; t < train.size(); ++t) {
      if (h.Learn(train[t], loss, 1.0 / (1.0 + lambda * static_cast<double>(t)), 300) != TRIB_OK) return;
    }
    size_t right = 0;
    for (const Doc& d : test) {
      auto s = h.Score(d);
      right += static_cast<int64_t>(std::max_element(s.begin(), s.end()) - s.begin()) == d.label;
    }
    const double acc = static_cast<double>(right) / static_cast<double>(test.size());
    EXPECT_GT(acc, 0.9) << "loss " << static_cast<int>(loss);
  }
}

}  // namespace
