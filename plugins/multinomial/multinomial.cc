// Family "multinomial": multinomial naive Bayes over bags of words.
//
// Statistics (sdEM Appendix A, Algorithms 2-4), two blocks:
//   block 0  C[k]      prior class counts,        nu = 0, abar = 1
//   block 1  N[w][k]   word counts per class,     nu = 0, abar = alpha
// laid out term-major (N[w][0..K-1] contiguous) so a document touches
// |d| runs of K doubles. theta(mu) is plain normalisation:
//   p(k) = C[k] / sum_j C[j],   p(w | k) = N[w][k] / M[k],  M[k] = sum_w N[w][k].
// The totals M[k] are kept incrementally in raw space (R[k] = sum_w raw),
// so M[k] = scale * R[k] + shift * alpha * |W| costs O(1) after any step.
// The Dirichlet prior in this parametrisation has nu = 0 (Appendix A), so
// NCLL and hinge never decay the counts; the check-step is Algorithm 2's
// N = max(N, 0) on the data part (raw >= 0), which keeps mu >= shift * abar.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "tributary/plugin_sdk.h"

namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;

struct Model {
  uint32_t K = 0;
  uint64_t V = 0;
  double alpha = 1.0;       // word pseudo-count
  double class_alpha = 1.0; // class pseudo-count
  uint64_t word_offset = 0; // = K
  std::vector<double> raw_word_total;  // R[k] = sum_w raw N[w][k]
  double raw_class_total = 0;          // sum_k raw C[k]
};

struct State {
  std::vector<double> log_m;  // log M[k] for the document being scored
};

inline Model* M(trib_family_model* m) { return reinterpret_cast<Model*>(m); }
inline const Model* M(const trib_family_model* m) { return reinterpret_cast<const Model*>(m); }

int Create(const trib_schema* schema, const trib_option* opts, size_t n, trib_family_model** out, trib_error* err) {
  return Guard(err, [&] {
    if (schema->vocab_size == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "multinomial needs a vocabulary (vocab_size is 0)");
    }
    if (schema->num_classes == 0) return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "multinomial needs >= 1 class");
    auto m = std::make_unique<Model>();
    m->K = schema->num_classes;
    m->V = schema->vocab_size;
    for (size_t i = 0; i < n; ++i) {
      std::string key = opts[i].key, val = opts[i].value;
      if (key == "prior") {
        if (val == "laplace") {
          m->alpha = 1.0;
        } else if (val == "log") {
          m->alpha = std::log(static_cast<double>(m->V));  // the paper's P2: ln |W|
        } else if (!tributary::sdk::ParseDouble(val.c_str(), &m->alpha) || m->alpha <= 0) {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                      "option prior='%s': expected 'laplace', 'log' or a number > 0", val.c_str());
        }
      } else if (key == "class_prior") {
        if (!tributary::sdk::ParseDouble(val.c_str(), &m->class_alpha) || m->class_alpha <= 0) {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option class_prior='%s': expected a number > 0", val.c_str());
        }
      } else {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                    "unknown option '%s' for family multinomial (known: prior, class_prior)", key.c_str());
      }
    }
    if (m->alpha <= 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "prior alpha = ln|W| is %g for |W| = %llu; expected > 0",
                  m->alpha, static_cast<unsigned long long>(m->V));
    }
    m->word_offset = m->K;
    m->raw_word_total.assign(m->K, 0.0);
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
    *num = 2;
    return TRIB_OK;
  }
  if (*num < 2) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for 2 blocks");
  blocks[0] = trib_block{0, m->K, 0.0, m->class_alpha, 1.0, 0.0};
  blocks[1] = trib_block{m->word_offset, m->V * m->K, 0.0, m->alpha, 1.0, 0.0};
  *num = 2;
  return TRIB_OK;
}

int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step*, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    m->raw_class_total = 0;
    for (uint32_t k = 0; k < m->K; ++k) {
      s->raw[k] = std::max(s->raw[k], 0.0);
      m->raw_class_total += s->raw[k];
    }
    std::fill(m->raw_word_total.begin(), m->raw_word_total.end(), 0.0);
    double* r = s->raw + m->word_offset;
    for (uint64_t w = 0; w < m->V; ++w) {
      double* row = r + w * m->K;
      for (uint32_t k = 0; k < m->K; ++k) {
        row[k] = std::max(row[k], 0.0);
        m->raw_word_total[k] += row[k];
      }
    }
    return TRIB_OK;
  });
}

int StateCreate(const trib_family_model* mm, uint64_t, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    st->log_m.resize(M(mm)->K);
    *out = reinterpret_cast<trib_family_state*>(st);
    return TRIB_OK;
  });
}

void StateDestroy(trib_family_state* s) { delete reinterpret_cast<State*>(s); }

// log p(k, x) = log p(k) + sum_w n_w log p(w | k)   (Algorithm 3, without the
// multinomial coefficient, which is the same for every class).
int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
          double* out, trib_error*) {
  const Model* m = M(mm);
  auto* st = reinterpret_cast<State*>(ss);
  const uint32_t K = m->K;
  if (st->log_m.size() < K) st->log_m.resize(K);
  const trib_block& cb = s->blocks[0];
  const trib_block& wb = s->blocks[1];
  const double log_ctot = std::log(cb.scale * m->raw_class_total + cb.shift * cb.alpha_bar * K);
  const double wshift = wb.shift * wb.alpha_bar;
  const double wscale = wb.scale;
  const double total = d->total_count;
  for (uint32_t k = 0; k < K; ++k) {
    const double mk = wscale * m->raw_word_total[k] + wshift * static_cast<double>(m->V);
    out[k] = std::log(cb.scale * s->raw[k] + cb.shift * cb.alpha_bar) - log_ctot - total * std::log(mk);
  }
  const double* base = s->raw + m->word_offset;
  for (uint32_t j = 0; j < d->num_terms; ++j) {
    const double* row = base + static_cast<uint64_t>(d->term_ids[j]) * K;
    const double n = d->term_counts[j];
    for (uint32_t k = 0; k < K; ++k) out[k] += n * std::log(wscale * row[k] + wshift);
  }
  return TRIB_OK;
}

// sum_k w_k s(k, x): w_k to C[k] and w_k n_w to N[w][k] (Table 1).
int Accumulate(const trib_family_model* mm, const trib_stats*, trib_family_state*, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err) {
  const Model* m = M(mm);
  const uint32_t K = m->K;
  uint32_t active[64];
  std::vector<uint32_t> active_big;
  uint32_t* act = active;
  if (K > 64) {
    active_big.resize(K);
    act = active_big.data();
  }
  uint32_t na = 0;
  for (uint32_t k = 0; k < K; ++k)
    if (w[k] != 0.0) act[na++] = k;
  if (na == 0) return TRIB_OK;
  size_t need = delta->size + na * (static_cast<size_t>(d->num_terms) + 1);
  if (need > delta->capacity && delta->grow(delta, need) != 0) {
    return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow delta to %zu entries", need);
  }
  size_t p = delta->size;
  for (uint32_t a = 0; a < na; ++a) {
    delta->index[p] = act[a];
    delta->value[p++] = w[act[a]];
  }
  for (uint32_t j = 0; j < d->num_terms; ++j) {
    const uint64_t row = m->word_offset + static_cast<uint64_t>(d->term_ids[j]) * K;
    const double n = d->term_counts[j];
    for (uint32_t a = 0; a < na; ++a) {
      delta->index[p] = row + act[a];
      delta->value[p++] = w[act[a]] * n;
    }
  }
  delta->size = p;
  return TRIB_OK;
}

// Check-step (Algorithm 2 lines 15, 22: N = max(N, 0)) and totals.
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step*, trib_error*) {
  Model* m = M(mm);
  const uint32_t K = m->K;
  const uint64_t off = m->word_offset;
  uint64_t row_base = off;  // start of the K-run holding the previous index
  for (size_t j = 0; j < count; ++j) {
    const uint64_t i = idx[j];
    double v = s->raw[i];
    if (v < 0) {
      v = 0;
      s->raw[i] = 0;
    }
    if (i < off) {
      m->raw_class_total += v - old_raw[j];
    } else {
      if (i - row_base >= K) row_base = i - (i - off) % K;  // one division per term, not per entry
      m->raw_word_total[i - row_base] += v - old_raw[j];
    }
  }
  return TRIB_OK;
}

int GrowClasses(const trib_family_model* om, const trib_stats* os, trib_family_model* nm, trib_stats* ns,
                trib_error* err) {
  return Guard(err, [&] {
    const Model* o = M(om);
    const Model* n = M(nm);
    for (uint32_t k = 0; k < o->K; ++k) ns->raw[k] = os->raw[k];
    for (uint64_t w = 0; w < o->V; ++w)
      for (uint32_t k = 0; k < o->K; ++k)
        ns->raw[n->word_offset + w * n->K + k] = os->raw[o->word_offset + w * o->K + k];
    return TRIB_OK;
  });
}

}  // namespace

#ifndef TRIB_MULTINOMIAL_VERSION
#define TRIB_MULTINOMIAL_VERSION "1.0.0"
#endif
TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "multinomial", TRIB_MULTINOMIAL_VERSION,
                             "multinomial naive Bayes over bags of words (Dirichlet prior)");

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  if (host == nullptr || host->abi_major != TRIB_ABI_MAJOR) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "host ABI mismatch");
  }
  trib_family_vtable& v = out->family;
  std::memset(&v, 0, sizeof(v));
  v.struct_size = sizeof(trib_family_vtable);
  v.create = Create;
  v.destroy = Destroy;
  v.clone = Clone;
  v.layout = Layout;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.state_destroy = StateDestroy;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.grow_classes = GrowClasses;
  return TRIB_OK;
}
