// Family "poisson-nb": Poisson naive Bayes over bags of words.
//
// An example of a Tributary family plugin written outside the Tributary source
// tree, against the installed SDK only (tributary/plugin_abi.h and
// tributary/plugin_sdk.h). docs/plugins.md in the Tributary sources walks
// through every function below; the comments here say what this family does.
//
// ---- Model ---------------------------------------------------------------------
//
//   p(k, x) = pi_k * prod_{w in W} Poisson(x_w; lambda_kw)
//
// x_w is the count of term w in the document (0 for the terms it lacks), pi is
// the class distribution and lambda_kw the expected count of term w in a
// document of class k. Unlike the multinomial, the model scores the absent
// terms too: log p(k, x) contains -Lambda_k = -sum_{w in W} lambda_kw, a
// per-class constant that this family caches, so a score still costs
// O(distinct terms x classes).
//
// (A variant with x_w ~ Poisson(lambda_kw * |x|) models the rate per token
// instead of per document; it is not a joint exponential family because |x|
// is a function of x, so this example keeps the plain Poisson.)
//
// ---- Sufficient statistics (sdEM's mu) ---------------------------------------------
//
// The model is a joint exponential family in (k, x):
//   log p(k, x) = sum_k 1[y=k] (log pi_k - Lambda_k)
//               + sum_{k,w} 1[y=k] x_w log lambda_kw - sum_w log x_w!
// with sufficient statistics s(k, x) = (1[y=k], 1[y=k] x_w), so the
// expectation parameters are N_k = E[1[y=k]] and X_kw = E[1[y=k] x_w]:
//
//   block 0  N[k]      class counts,        K entries      nu = 0, abar = b
//   block 1  X[w][k]   term counts,         |W| * K entries nu = 0, abar = a
//
// X is term-major (X[w][0..K-1] contiguous, at K + w*K + k), so a document
// touches one run of K doubles per distinct term.
//
// theta(mu):   pi_k = N_k / sum_l N_l,   lambda_kw = X_kw / N_k,
//              Lambda_k = T_k / N_k  with  T_k = sum_w X_kw.
// T_k is kept incrementally in raw space (R_k = sum_w raw X[w][k]), so with
// the block's lazy map T_k = scale * R_k + shift * a * |W| costs O(1).
//
// ---- Prior ---------------------------------------------------------------------
//
// With nu = 0 the conjugate prior exp(<eta, abar>) in the natural parameters
// eta_k = log pi_k - Lambda_k, eta_kw = log lambda_kw is
//   prod_k pi_k^b  *  prod_{k,w} lambda_kw^a exp(-b lambda_kw),
// i.e. a Dirichlet(b + 1) on pi and a Gamma(shape a + 1, rate b) on every
// rate: b pseudo-documents per class that contain every term a times in
// total. Algorithm 1 starts at mu_0 = abar (lambda = a/b). Options:
//   prior=a       > 0, default 1  (also set by the program's --prior)
//   prior_docs=b  > 0, default 1
// Under NLL with rho_t = 1/(1+t) the engine averages the statistics, and
// theta(mu) is the MAP estimate  lambda_kw = (S_kw + a) / (n_k + b),
// pi_k = (n_k + b) / (n + K b)  (S_kw: total count of w in the n_k documents
// of class k); the example's tests check this.
//
// ---- Expected statistics (Table 1) -------------------------------------------------
//
// sum_k w_k s(k, x): w_k to N[k] and w_k x_w to X[w][k], for every class with
// w_k != 0 (NLL: w = e_y; NCLL: w_k = 1[k=y] - p(k|x); hinge: +1 / -1 on y and
// the most offending class).
//
// ---- Check-step ----------------------------------------------------------------
//
// NCLL and hinge subtract statistics of the wrong classes, so a step can push
// N_k or X_kw to zero or below, where log lambda or log pi is undefined. The
// check keeps the data part of every statistic non-negative: raw >= 0, i.e.
//   mu >= shift * abar   (the prior mass the engine has added so far),
// which is >= rho_t * abar / n (the paper's N = max(N, rho/n) of §4.1 and its
// MNB) and > 0 because the engine keeps shift > 0. It is the projection onto
// {raw >= 0}, costs O(1) per touched entry and leaves feasible statistics
// bit for bit unchanged (at any rho, so a snapshot round trip is exact).
// Untouched entries need no check: their raw does not change.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tributary/plugin_sdk.h"

#ifndef POISSON_NB_VERSION
#define POISSON_NB_VERSION "1.0.0"
#endif

namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;

constexpr uint32_t kBlockN = 0;
constexpr uint32_t kBlockX = 1;
constexpr uint32_t kNumBlocks = 2;
constexpr double kMaxPrior = 1e100;

// The host's functions (lgamma from Boost.Math: thread-safe, unlike glibc's
// lgamma, which writes the global signgam). Set by tributary_plugin_init; the
// host keeps the table alive while the plugin is loaded.
const trib_host_api* g_host = nullptr;

struct Model {
  uint32_t K = 0;
  uint64_t V = 0;
  double a = 1.0;                      // abar of X: Gamma shape - 1 (pseudo-occurrences)
  double b = 1.0;                      // abar of N: Gamma rate, class pseudo-count
  uint64_t x_offset = 0;               // = K
  double raw_class_total = 0;          // sum_k raw N[k]
  std::vector<double> raw_term_total;  // R_k = sum_w raw X[w][k]
};

// Per-thread scratch for score(): no allocation per document.
struct State {
  std::vector<double> log_n;  // log N_k of the document being scored
};

// The options: what create() accepts, with types, ranges, defaults and help.
// ParseOptions reads them; TRIBUTARY_DEFINE_PLUGIN_OPTIONS (at the end)
// exports the table so that `tributary plugins --options poisson-nb` and
// `tributary inspect` can show it.
constexpr trib_option_spec kOptions[] = {
    tributary::sdk::Number("prior", "1", "a: pseudo-occurrences of every term per class (Gamma shape - 1)")
        .Above(0)
        .AtMost(kMaxPrior),
    tributary::sdk::Number("prior_docs", "1", "b: pseudo-documents per class (Gamma rate)").Above(0).AtMost(kMaxPrior),
    {},  // the end of the table
};

Model* M(trib_family_model* m) { return reinterpret_cast<Model*>(m); }
const Model* M(const trib_family_model* m) { return reinterpret_cast<const Model*>(m); }

double LogFactorial(double x) { return g_host->lgamma(x + 1.0); }

// ---- Lifetime --------------------------------------------------------------------

int Create(const trib_schema* schema, const trib_option* opts, size_t num_opts, trib_family_model** out,
           trib_error* err) {
  return Guard(err, [&] {
    if (schema->vocab_size == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "poisson-nb needs a vocabulary (vocab_size is 0)");
    }
    if (schema->num_classes == 0) return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "poisson-nb needs >= 1 class");
    auto m = std::make_unique<Model>();
    m->K = schema->num_classes;
    m->V = schema->vocab_size;
    // The option table (kOptions) refuses unknown keys, naming them and the
    // known ones (a typo must not silently train with the defaults), and bad
    // values, naming what it expects; options not given take its defaults.
    tributary::sdk::OptionValues o;
    int rc = tributary::sdk::ParseOptions(kOptions, TRIB_KIND_FAMILY, "poisson-nb", opts, num_opts, &o, err);
    if (rc != TRIB_OK) return rc;
    m->a = o.Number("prior");
    m->b = o.Number("prior_docs");
    if (m->V > (UINT64_MAX - m->K) / m->K) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "vocabulary of %llu terms x %u classes is too large",
                  static_cast<unsigned long long>(m->V), m->K);
    }
    m->x_offset = m->K;
    m->raw_term_total.assign(m->K, 0.0);
    *out = reinterpret_cast<trib_family_model*>(m.release());
    return TRIB_OK;
  });
}

void Destroy(trib_family_model* m) { delete M(m); }

int Clone(const trib_family_model* m, trib_family_model** out, trib_error* err) {
  return Guard(err, [&] {
    *out = reinterpret_cast<trib_family_model*>(new Model(*M(m)));
    return TRIB_OK;
  });
}

int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err) {
  const Model* m = M(mm);
  if (blocks == nullptr) {
    *num = kNumBlocks;
    return TRIB_OK;
  }
  if (*num < kNumBlocks) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for %u blocks", kNumBlocks);
  //                       offset       size        nu   alpha_bar  scale shift (engine's)
  blocks[kBlockN] = trib_block{0, m->K, 0.0, m->b, 1.0, 0.0};
  blocks[kBlockX] = trib_block{m->x_offset, m->V * m->K, 0.0, m->a, 1.0, 0.0};
  *num = kNumBlocks;
  return TRIB_OK;
}

// The check-step on every entry, then the totals from scratch. O(model); the
// engine calls it after create, snapshot load, class growth and the rare
// re-materialisation of a block.
int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step*, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    for (uint32_t b = 0; b < kNumBlocks; ++b) {
      const trib_block& blk = s->blocks[b];
      if (!(blk.scale > 0) || !(blk.shift * blk.alpha_bar > 0) || !std::isfinite(blk.shift * blk.alpha_bar)) {
        return Fail(err, TRIB_ERR_NUMERIC,
                    "block %u has scale %g and prior mass shift * abar = %g; poisson-nb needs both > 0", b, blk.scale,
                    blk.shift * blk.alpha_bar);
      }
    }
    for (uint64_t i = 0; i < s->size; ++i) {
      if (!std::isfinite(s->raw[i])) {
        return Fail(err, TRIB_ERR_NUMERIC, "statistic %llu is not finite (%g)", static_cast<unsigned long long>(i),
                    s->raw[i]);
      }
      if (s->raw[i] < 0) s->raw[i] = 0;  // the check-step (see the header)
    }
    m->raw_class_total = 0;
    for (uint32_t k = 0; k < m->K; ++k) m->raw_class_total += s->raw[k];
    std::fill(m->raw_term_total.begin(), m->raw_term_total.end(), 0.0);
    for (uint64_t w = 0; w < m->V; ++w) {
      const double* row = s->raw + m->x_offset + w * m->K;
      for (uint32_t k = 0; k < m->K; ++k) m->raw_term_total[k] += row[k];
    }
    return TRIB_OK;
  });
}

int StateCreate(const trib_family_model* mm, uint64_t, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto st = std::make_unique<State>();
    st->log_n.resize(M(mm)->K);
    *out = reinterpret_cast<trib_family_state*>(st.release());
    return TRIB_OK;
  });
}

void StateDestroy(trib_family_state* s) { delete reinterpret_cast<State*>(s); }

// ---- Per document ------------------------------------------------------------------

// log p(k, x) = log pi_k - Lambda_k + sum_{w in x} (x_w log lambda_kw - log x_w!)
// for every k. Reads the model and the statistics only (concurrent calls on
// one model are safe); the scratch lives in the caller's state.
int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
          double* log_joint, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K;
    if (st->log_n.size() < K) st->log_n.resize(K);  // a state made before grow_classes
    const trib_block& nb = s->blocks[kBlockN];
    const trib_block& xb = s->blocks[kBlockX];
    const double n_shift = nb.shift * nb.alpha_bar;
    const double x_shift = xb.shift * xb.alpha_bar;
    const double n_total = nb.scale * m->raw_class_total + n_shift * K;
    if (!(n_total > 0) || !std::isfinite(n_total)) {
      return Fail(err, TRIB_ERR_NUMERIC, "sum of the class counts is %g, expected a positive number", n_total);
    }
    double log_fact = 0;  // sum_w log x_w!, the same for every class
    for (uint32_t j = 0; j < d->num_terms; ++j) log_fact += LogFactorial(d->term_counts[j]);
    const double base = -std::log(n_total) - log_fact;
    const double length = d->total_count;
    for (uint32_t k = 0; k < K; ++k) {
      const double nk = nb.scale * s->raw[k] + n_shift;
      const double tk = xb.scale * m->raw_term_total[k] + x_shift * static_cast<double>(m->V);
      if (!(nk > 0) || !std::isfinite(nk) || !std::isfinite(tk)) {
        return Fail(err, TRIB_ERR_NUMERIC, "statistics of class %u are not usable (N = %g, T = %g)", k, nk, tk);
      }
      st->log_n[k] = std::log(nk);
      // log pi_k - Lambda_k - |x| log N_k   (the last from log lambda = log X - log N)
      log_joint[k] = st->log_n[k] + base - tk / nk - length * st->log_n[k];
    }
    const double* x = s->raw + m->x_offset;
    for (uint32_t j = 0; j < d->num_terms; ++j) {
      const double* row = x + static_cast<uint64_t>(d->term_ids[j]) * K;
      const double c = d->term_counts[j];
      for (uint32_t k = 0; k < K; ++k) log_joint[k] += c * std::log(xb.scale * row[k] + x_shift);
    }
    return TRIB_OK;
  });
}

// Appends sum_k w_k s(k, x) (Table 1): (k, w_k) and (K + w*K + k, w_k x_w) for
// every class with w_k != 0. Indices are distinct and ascending.
int Accumulate(const trib_family_model* mm, const trib_stats*, trib_family_state*, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    const uint32_t K = m->K;
    size_t active = 0;
    for (uint32_t k = 0; k < K; ++k) active += (w[k] != 0.0);
    if (active == 0) return TRIB_OK;
    // Reserve once, then write directly (trib_delta_push would do too).
    const size_t need = delta->size + active * (static_cast<size_t>(d->num_terms) + 1);
    if (need > delta->capacity && delta->grow(delta, need) != 0) {
      return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow the delta to %zu entries", need);
    }
    size_t p = delta->size;
    for (uint32_t k = 0; k < K; ++k) {
      if (w[k] == 0.0) continue;
      delta->index[p] = k;
      delta->value[p++] = w[k];
    }
    for (uint32_t j = 0; j < d->num_terms; ++j) {
      const uint64_t row = m->x_offset + static_cast<uint64_t>(d->term_ids[j]) * K;
      const double c = d->term_counts[j];
      for (uint32_t k = 0; k < K; ++k) {
        if (w[k] == 0.0) continue;
        delta->index[p] = row + k;
        delta->value[p++] = w[k] * c;
      }
    }
    delta->size = p;
    return TRIB_OK;
  });
}

// The engine has added rho * delta to raw[index[j]] (old value old_raw[j])
// and moved the blocks' scale/shift. Check-step on the touched entries
// (raw >= 0) and the totals updated by the change: O(count).
//
// An entry that is no longer finite (a step that overflowed) is reset to the
// prior level (raw = 0) so that the model stays usable and its totals stay
// consistent, and the call reports TRIB_ERR_NUMERIC naming the entry.
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* index, const double* old_raw, size_t count,
           const trib_step*, trib_error* err) {
  Model* m = M(mm);
  const uint32_t K = m->K;
  double* raw = s->raw;
  size_t bad = count;
  for (size_t j = 0; j < count; ++j) {
    const uint64_t i = index[j];
    double v = raw[i];
    if (!std::isfinite(v)) {
      if (bad == count) bad = j;
      v = 0;
    } else if (v < 0) {
      v = 0;
    }
    raw[i] = v;
    if (i < m->x_offset) {
      m->raw_class_total += v - old_raw[j];
    } else {
      m->raw_term_total[(i - m->x_offset) % K] += v - old_raw[j];
    }
  }
  if (bad != count) {
    return Fail(err, TRIB_ERR_NUMERIC, "statistic %llu became non-finite (was %g before the step); reset to the prior",
                static_cast<unsigned long long>(index[bad]), old_raw[bad]);
  }
  return TRIB_OK;
}

// Open classes: copy every old class's N and X to its place in the layout
// with one more class (the new class keeps raw 0: the current prior level).
int GrowClasses(const trib_family_model* om, const trib_stats* os, trib_family_model* nm, trib_stats* ns,
                trib_error* err) {
  return Guard(err, [&] {
    const Model* o = M(om);
    const Model* n = M(nm);
    if (n->V != o->V || n->K < o->K) return Fail(err, TRIB_ERR_INTERNAL, "grow_classes: incompatible layouts");
    for (uint32_t k = 0; k < o->K; ++k) ns->raw[k] = os->raw[k];
    for (uint64_t w = 0; w < o->V; ++w) {
      std::memcpy(ns->raw + n->x_offset + w * n->K, os->raw + o->x_offset + w * o->K, o->K * sizeof(double));
    }
    return TRIB_OK;
  });
}

// ABI 1.1: the running totals travel in snapshots, so that a model resumed
// from a snapshot continues bit for bit (recomputing them sums in another
// order and differs in the last bits).
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  const Model* m = reinterpret_cast<const Model*>(mm);
  *size = static_cast<size_t>(m->K) + 1;
  if (out == nullptr) return TRIB_OK;
  std::copy(m->raw_term_total.begin(), m->raw_term_total.end(), out);
  out[m->K] = m->raw_class_total;
  return TRIB_OK;
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  Model* m = reinterpret_cast<Model*>(mm);
  if (size != static_cast<size_t>(m->K) + 1) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cache has %zu values, expected %u", size, m->K + 1);
  }
  std::copy(in, in + m->K, m->raw_term_total.begin());
  m->raw_class_total = in[m->K];
  return TRIB_OK;
}

}  // namespace

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "poisson-nb", POISSON_NB_VERSION,
                             "Poisson naive Bayes over term counts (Gamma prior) - SDK example");

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);  // optional (ABI 1.3): the host can show the table

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  if (host == nullptr || host->abi_major != TRIB_ABI_MAJOR) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "poisson-nb was built for plugin ABI %u.x, the host has %u.x",
                TRIB_ABI_MAJOR, host ? host->abi_major : 0u);
  }
  // lgamma is in ABI 1.0's host table; check the size all the same, as a
  // plugin must for any field added in a later minor version.
  if (host->struct_size < offsetof(trib_host_api, lgamma) + sizeof(host->lgamma) || host->lgamma == nullptr) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "the host offers no lgamma");
  }
  g_host = host;
  trib_family_vtable& v = out->family;
  std::memset(&v, 0, sizeof(v));
  v.struct_size = sizeof(trib_family_vtable);
  v.create = Create;
  v.destroy = Destroy;
  v.clone = Clone;
  v.layout = Layout;
  v.init_stats = nullptr;  // raw starts at zero: mu_0 = abar (Algorithm 1, line 1)
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.state_destroy = StateDestroy;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.perplexity_tokens = nullptr;  // per-word perplexity over doc->total_count tokens
  v.grow_classes = GrowClasses;
  v.export_cache = ExportCache;
  v.import_cache = ImportCache;
  return TRIB_OK;
}
