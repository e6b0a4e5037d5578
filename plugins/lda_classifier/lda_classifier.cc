// Family "lda-classifier": one LDA per class (sdEM Appendix B, Algorithms
// 5-7), trained with online collapsed Gibbs sampling as the local step.
//
// Model (Appendix B's generative process): y ~ p(y | theta_Y); the words of a
// document of class y come from class y's own LDA with Z topics: topic
// proportions phi_y ~ Dir(alpha) (marginalised), z_n ~ phi_y,
// w_n ~ beta_{y, z_n}. The unknowns are theta_Y and beta_{y, z}.
//
// Statistics, two blocks:
//   block 0  C[k]         prior class counts,                K entries,
//                         nu = 0, abar = class_prior (Algorithm 5 line 1: 1)
//   block 1  N[k][z][w]   words-per-topic counts per class,  V*K*Z entries,
//                         nu = 0, abar = eta / Z (Algorithm 5 line 1)
// block 1 is laid out term-major, N[w][k][z] at C + (w*C + k)*Z + z, so a
// document touches |d| runs of K*Z doubles; C >= K is the class capacity
// (ABI 1.4: classes K..C-1 are padding at raw zero until add_class brings
// them into use; C = K unless the model grew while it was trained). theta(mu) is plain normalisation:
//   p(k) = C[k] / sum_j C[j],   beta_{k,z,w} = N[k][z][w] / M[k][z],
//   M[k][z] = sum_w N[k][z][w],
// with the totals kept incrementally in raw space (R[k][z] = sum_w raw), so
// M[k][z] = scale * R[k][z] + shift * abar * |W| costs O(1) after any step
// (Algorithm 6 line 7 keeps M the same way).
//
// Local step (score): for every class y, an online collapsed Gibbs sampler
// over the topics of the current document only, with beta fixed at the
// current estimate (eq. 19, Appendix B):
//   p(z_n = z | y, z_{-n}, d)  ∝  beta_{y,z,w_n} (S_z^{(-n)} + alpha),
// where S_z^{(-n)} is the (weighted) number of the document's other tokens
// assigned to z. The chain starts with the heuristic of Appendix B (option
// init=sequential): the tokens are drawn one after the other from eq. 19 with
// S counted on the fly (zero for the first token), i.e. one sweep of Gibbs
// sampling from an empty assignment. Then `burn_in` sweeps are discarded and
// `samples` sweeps are averaged. The averages are Rao-Blackwellised: a
// sampling sweep adds each token's normalised conditional eq. 19 (not the
// sampled indicator) to the expected counts s[z][w], which is still an
// unbiased estimate of E[s | y, d] at stationarity with less variance.
//
// With share_word_topic=1 (the default, the paper's setting: "all the
// occurrences of the same word in a document share the same hidden topic",
// as the sLDA code does) each distinct term is one variable carrying all its
// n_w occurrences: S counts occurrences and eq. 19 is applied with
// S_z^{(-w)} excluding the term's own occurrences. With share_word_topic=0
// every occurrence is its own variable (standard collapsed Gibbs, Blei's
// notes eq. 30 with beta fixed); a count n_w is split into
// m = min(ceil(n_w), 256) tokens of weight n_w / m (exact unit tokens for
// integer counts up to 256).
//
// Score: log p(y, x) is estimated by the plug-in
//   log p(y) + sum_w n_w log sum_z phihat_{y,z} beta_{y,z,w},
//   phihat_{y,z} = average over the sampling sweeps of (S_z + alpha) / (N + Z alpha),
// the document's topic proportions under class y estimated by the chain (the
// multinomial coefficient is common to all classes and left out).
//
// Expected statistics (Table 2; Algorithms 5-7): accumulate adds w_k to C[k]
// and w_k s_k[z][w] to N[k][z][w] for every class k with w_k != 0, reusing
// the chain that score ran for class k (NLL: only y; NCLL: every class with
// 1[k = y] - p(k | x); hinge: y and the most offending class, or nothing).
// Cost: distinct terms x topics x classes, never the vocabulary.
//
// Check-step (Algorithm 5 lines 16, 23 and Algorithm 6 line 6:
// N = max(N, 0), C = max(C, 0) on the data part, N being the count without
// the prior mass gamma the steps added, which starts at the prior and may be
// taken away entirely): raw >= -abar for every touched entry (in the lazy map
// N = scale (raw + abar), lib/include/tributary/model.h), which keeps
// mu >= gamma * abar > 0 (the paper's gamma in Normalize(N, gamma)), so every
// beta and p(k) stays strictly positive and finite. nu = 0, so NCLL and hinge (c = 0) never decay
// the counts, and the block map alone keeps untouched entries feasible.
//
// Options:
//   topics=Z            topics per class (integer >= 1, default 2: Figure 4)
//   prior=eta           words-per-topic prior: every N[k][z][w] starts at
//                       eta / Z (> 0, default 0.1 as in Algorithms 5-7)
//   class_prior=a       prior class count (> 0, default 1)
//   alpha=a             Dirichlet parameter of the topic proportions phi_y
//                       (> 0, default 1 / Z as in Appendix B)
//   burn_in=B           Gibbs sweeps discarded (integer >= 0, default 3)
//   samples=S           Gibbs sweeps averaged (integer >= 1, default 5)
//   share_word_topic=b  1: all occurrences of a word share one topic (the
//                       paper's simplification, default); 0: one topic per
//                       occurrence
//   init=sequential|uniform  first assignment: Appendix B's heuristic
//                       (default) or uniformly random topics
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tributary/plugin_sdk.h"

namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;

constexpr uint32_t kMaxTopics = 4096;
constexpr uint32_t kMaxSweeps = 100000;
constexpr uint32_t kMaxTokensPerTerm = 256;

struct Model {
  uint32_t K = 0;
  uint32_t C = 0;  // class capacity (>= K): the layout's class count
  uint64_t V = 0;
  uint32_t Z = 2;
  double eta = 0.1;          // words-per-topic prior mass per word (entry abar = eta / Z)
  double class_prior = 1.0;  // abar of C[k]
  double alpha = 0.5;        // Dirichlet of the topic proportions
  uint32_t burn_in = 3;
  uint32_t samples = 5;
  bool share = true;
  bool sequential_init = true;
  uint64_t word_offset = 0;            // = C
  std::vector<double> raw_word_total;  // R[k*Z + z] = sum_w raw N[w][k][z]
  double raw_class_total = 0;          // sum_k raw C[k]

  uint64_t Row(uint32_t term) const { return word_offset + static_cast<uint64_t>(term) * C * Z; }
};

struct State {
  std::mt19937_64 rng;
  // The document last scored (checked by accumulate).
  uint64_t doc_index = 0;
  uint32_t doc_terms = 0;
  // Expected counts s_k[j][z] for every class k (K * T * Z, class-major).
  std::vector<double> expected;
  // Scratch.
  std::vector<double> beta;        // T * Z: beta_{k,z,w_j} / max_z beta_{k,z,w_j}
  std::vector<double> log_max;     // T: log max_z beta_{k,z,w_j}
  std::vector<uint32_t> tok_term;  // token -> term position j
  std::vector<double> tok_weight;  // token -> weight
  std::vector<uint32_t> tok_topic;
  std::vector<double> topic_count;      // S_z
  std::vector<double> phi_sum;          // sum over sampling sweeps of phihat
  std::vector<double> prob;             // Z
  std::vector<double> inv_topic_total;  // Z: 1 / M[k][z]

  double Uniform() { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }  // in [0, 1)
};

inline Model* M(trib_family_model* m) { return tributary::sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return tributary::sdk::As<Model>(m); }

namespace sdk = tributary::sdk;

// The options (`tributary plugins --options lda-classifier`); see the header comment.
constexpr trib_option_spec kOptions[] = {
    sdk::Integer("topics", "2", "topics per class Z").AtLeast(1).AtMost(kMaxTopics),
    sdk::Number("prior", "0.1", "words-per-topic prior eta: every N[k][z][w] starts at eta / Z").Above(0),
    sdk::Number("class_prior", "1", "prior class count").Above(0),
    sdk::Number("alpha", "1/Z", "Dirichlet parameter of the topic proportions").Above(0).Derived(),
    sdk::Integer("burn_in", "3", "Gibbs sweeps discarded").AtLeast(0).AtMost(kMaxSweeps),
    sdk::Integer("samples", "5", "Gibbs sweeps averaged").AtLeast(1).AtMost(kMaxSweeps),
    sdk::Boolean("share_word_topic", "1", "1: all occurrences of a word share one topic; 0: one per occurrence"),
    sdk::Choice("init", "sequential|uniform", "sequential",
                "first assignment: Appendix B's heuristic or uniformly random topics"),
    {},
};

int Create(const trib_schema* schema, const trib_option* opts, size_t n, trib_family_model** out, trib_error* err) {
  return Guard(err, [&] {
    if (schema->vocab_size == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "lda-classifier needs a vocabulary (vocab_size is 0)");
    }
    if (schema->num_classes == 0 && schema->class_capacity == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                  "lda-classifier needs >= 1 class, or room for classes (open classes)");
    }
    auto m = std::make_unique<Model>();
    m->K = schema->num_classes;
    m->V = schema->vocab_size;
    sdk::OptionValues o;
    if (int rc = sdk::ParseOptions(kOptions, TRIB_KIND_FAMILY, "lda-classifier", opts, n, &o, err); rc != TRIB_OK) {
      return rc;
    }
    m->Z = o.Integer<uint32_t>("topics");
    m->eta = o.Number("prior");
    m->class_prior = o.Number("class_prior");
    m->alpha = o.HasValue("alpha") ? o.Number("alpha") : 1.0 / m->Z;
    m->burn_in = o.Integer<uint32_t>("burn_in");
    m->samples = o.Integer<uint32_t>("samples");
    m->share = o.Flag("share_word_topic");
    m->sequential_init = o.Is("init", "sequential");
    m->C = m->K;
    if (schema->struct_size > offsetof(trib_schema, class_capacity)) m->C = std::max(m->K, schema->class_capacity);
    const uint64_t cz = static_cast<uint64_t>(m->C) * m->Z;
    if (m->V > (uint64_t{1} << 60) / cz) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "vocabulary x classes x topics = %llu x %llu is too large",
                  static_cast<unsigned long long>(m->V), static_cast<unsigned long long>(cz));
    }
    m->word_offset = m->C;
    m->raw_word_total.reserve(cz);
    m->raw_word_total.assign(static_cast<uint64_t>(m->K) * m->Z, 0.0);
    *out = reinterpret_cast<trib_family_model*>(m.release());
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
  blocks[0] = trib_block{0, m->C, 0.0, m->class_prior, 1.0, 0.0};
  blocks[1] = trib_block{m->word_offset, m->V * m->C * m->Z, 0.0, m->eta / m->Z, 1.0, 0.0};
  *num = 2;
  return TRIB_OK;
}

// Check-step over everything (raw >= -abar) and the totals. With rho = 0
// feasible statistics are left bit for bit.
int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step*, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    const uint64_t KZ = static_cast<uint64_t>(m->K) * m->Z;
    for (uint64_t i = 0; i < s->size; ++i) {
      if (!std::isfinite(s->raw[i])) {
        return Fail(err, TRIB_ERR_NUMERIC, "statistic %llu is %g", static_cast<unsigned long long>(i), s->raw[i]);
      }
    }
    m->raw_class_total = 0;
    const double cfloor = -s->blocks[0].alpha_bar, wfloor = -s->blocks[1].alpha_bar;
    for (uint32_t k = 0; k < m->K; ++k) {
      s->raw[k] = std::max(s->raw[k], cfloor);
      m->raw_class_total += s->raw[k];
    }
    std::fill(s->raw + m->K, s->raw + m->C, 0.0);  // padding (a block restart moves it)
    std::fill(m->raw_word_total.begin(), m->raw_word_total.end(), 0.0);
    double* total = m->raw_word_total.data();
    const uint64_t CZ = static_cast<uint64_t>(m->C) * m->Z;
    for (uint64_t w = 0; w < m->V; ++w) {
      double* row = s->raw + m->Row(static_cast<uint32_t>(w));
      for (uint64_t kz = 0; kz < KZ; ++kz) {
        row[kz] = std::max(row[kz], wfloor);
        total[kz] += row[kz];
      }
      std::fill(row + KZ, row + CZ, 0.0);
    }
    return TRIB_OK;
  });
}

int StateCreate(const trib_family_model*, uint64_t seed, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    st->rng.seed(seed);
    *out = reinterpret_cast<trib_family_state*>(st);
    return TRIB_OK;
  });
}

// Draws an index from unnormalised probabilities p[0..Z) summing to `sum`.
inline uint32_t Draw(State* st, const double* p, uint32_t Z, double sum) {
  double u = st->Uniform() * sum;
  for (uint32_t z = 0; z + 1 < Z; ++z) {
    u -= p[z];
    if (u < 0) return z;
  }
  return Z - 1;
}

// The online collapsed Gibbs sampler for class k (eq. 19) on the tokens
// prepared in `st`; writes the expected counts s_k[j][z] into `expected`
// (T * Z) and returns the estimate of log p(x | k) (see the file comment).
double GibbsForClass(const Model* m, const trib_stats* s, State* st, const trib_document* d, uint32_t k,
                     double* expected) {
  const uint32_t Z = m->Z;
  const uint32_t T = d->num_terms;
  const trib_block& wb = s->blocks[1];
  const double wscale = wb.scale, wshift = wb.shift * wb.alpha_bar;
  const double mshift = wshift * static_cast<double>(m->V);
  double* beta = st->beta.data();
  double* inv_total = st->inv_topic_total.data();
  // beta_{k,z,w_j} relative to its largest topic (in (0, 1]): the sampler
  // works with ratios. Direct division unless some beta is too small for
  // that (then through logs, so nothing underflows to 0).
  for (uint32_t z = 0; z < Z; ++z)
    inv_total[z] = 1.0 / (wscale * m->raw_word_total[static_cast<size_t>(k) * Z + z] + mshift);
  for (uint32_t j = 0; j < T; ++j) {
    const double* row = s->raw + m->Row(d->term_ids[j]) + static_cast<uint64_t>(k) * Z;
    double* b = beta + static_cast<size_t>(j) * Z;
    double bmax = 0, bmin = INFINITY;
    for (uint32_t z = 0; z < Z; ++z) {
      b[z] = (wscale * row[z] + wshift) * inv_total[z];
      bmax = std::max(bmax, b[z]);
      bmin = std::min(bmin, b[z]);
    }
    if (bmin >= 0x1p-900 && bmax <= 0x1p900) {
      const double r = 1.0 / bmax;
      for (uint32_t z = 0; z < Z; ++z) b[z] *= r;
      st->log_max[j] = std::log(bmax);
      continue;
    }
    double lmax = -INFINITY;
    for (uint32_t z = 0; z < Z; ++z) {
      b[z] = std::log(wscale * row[z] + wshift) + std::log(inv_total[z]);
      lmax = std::max(lmax, b[z]);
    }
    for (uint32_t z = 0; z < Z; ++z) b[z] = std::exp(b[z] - lmax);
    st->log_max[j] = lmax;
  }
  const size_t ntok = st->tok_term.size();
  const uint32_t* tterm = st->tok_term.data();
  const double* tweight = st->tok_weight.data();
  uint32_t* ttopic = st->tok_topic.data();
  double* S = st->topic_count.data();
  double* p = st->prob.data();
  const double alpha = m->alpha;
  std::fill(S, S + Z, 0.0);
  // Initialisation (Appendix B): sequential draws from eq. 19 with S counted
  // on the fly, or uniform topics.
  for (size_t t = 0; t < ntok; ++t) {
    uint32_t z;
    if (m->sequential_init) {
      const double* b = beta + static_cast<size_t>(tterm[t]) * Z;
      double sum = 0;
      for (uint32_t zz = 0; zz < Z; ++zz) sum += (p[zz] = b[zz] * (S[zz] + alpha));
      z = Draw(st, p, Z, sum);
    } else {
      z = static_cast<uint32_t>(st->Uniform() * Z);
      if (z >= Z) z = Z - 1;
    }
    ttopic[t] = z;
    S[z] += tweight[t];
  }
  std::fill(expected, expected + static_cast<size_t>(T) * Z, 0.0);
  double* phi = st->phi_sum.data();
  std::fill(phi, phi + Z, 0.0);
  const double total_weight = d->total_count;
  const double phi_norm = 1.0 / (total_weight + Z * alpha);
  const uint32_t sweeps = m->burn_in + m->samples;
  for (uint32_t sweep = 0; sweep < sweeps; ++sweep) {
    const bool sampling = sweep >= m->burn_in;
    for (size_t t = 0; t < ntok; ++t) {
      const uint32_t j = tterm[t];
      const double wt = tweight[t];
      S[ttopic[t]] = std::max(S[ttopic[t]] - wt, 0.0);  // S^{(-n)} (max: rounding of fractional weights)
      const double* b = beta + static_cast<size_t>(j) * Z;
      double sum = 0;
      for (uint32_t z = 0; z < Z; ++z) sum += (p[z] = b[z] * (S[z] + alpha));  // eq. 19
      if (sampling) {
        double* e = expected + static_cast<size_t>(j) * Z;
        const double f = wt / sum;
        for (uint32_t z = 0; z < Z; ++z) e[z] += f * p[z];
      }
      const uint32_t z = Draw(st, p, Z, sum);
      ttopic[t] = z;
      S[z] += wt;
    }
    if (sampling) {
      for (uint32_t z = 0; z < Z; ++z) phi[z] += (S[z] + alpha) * phi_norm;
    }
  }
  const double inv = 1.0 / m->samples;
  for (size_t i = 0; i < static_cast<size_t>(T) * Z; ++i) expected[i] *= inv;
  for (uint32_t z = 0; z < Z; ++z) phi[z] *= inv;
  // log p(x | k) ≈ sum_j n_j log sum_z phihat_z beta_{k,z,w_j}.
  double ll = 0;
  for (uint32_t j = 0; j < T; ++j) {
    const double* b = beta + static_cast<size_t>(j) * Z;
    double mix = 0;
    for (uint32_t z = 0; z < Z; ++z) mix += phi[z] * b[z];
    ll += d->term_counts[j] * (st->log_max[j] + std::log(mix));
  }
  return ll;
}

int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d, double* out,
          trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K, Z = m->Z, T = d->num_terms;
    // Tokens.
    st->tok_term.clear();
    st->tok_weight.clear();
    for (uint32_t j = 0; j < T; ++j) {
      const double c = d->term_counts[j];
      if (m->share) {
        st->tok_term.push_back(j);
        st->tok_weight.push_back(c);
        continue;
      }
      const double reps = std::min(std::ceil(c), static_cast<double>(kMaxTokensPerTerm));
      const uint32_t r = reps < 1 ? 1u : static_cast<uint32_t>(reps);
      const double wt = c / r;
      for (uint32_t i = 0; i < r; ++i) {
        st->tok_term.push_back(j);
        st->tok_weight.push_back(wt);
      }
    }
    st->tok_topic.resize(st->tok_term.size());
    st->beta.resize(static_cast<size_t>(T) * Z);
    st->log_max.resize(T);
    st->topic_count.resize(Z);
    st->phi_sum.resize(Z);
    st->prob.resize(Z);
    st->inv_topic_total.resize(Z);
    st->expected.resize(static_cast<size_t>(K) * T * Z);
    const trib_block& cb = s->blocks[0];
    const double log_ctot = std::log(cb.scale * m->raw_class_total + cb.shift * cb.alpha_bar * K);
    for (uint32_t k = 0; k < K; ++k) {
      const double ll = GibbsForClass(m, s, st, d, k, st->expected.data() + static_cast<size_t>(k) * T * Z);
      out[k] = std::log(cb.scale * s->raw[k] + cb.shift * cb.alpha_bar) - log_ctot + ll;
    }
    st->doc_index = d->index;
    st->doc_terms = T;
    return TRIB_OK;
  });
}

// sum_k w_k E_z[s(k, z, x)] (Table 2): w_k to C[k] and w_k s_k[z][w] to
// N[k][z][w], from the chains score() ran on this document.
int Accumulate(const trib_family_model* mm, const trib_stats*, trib_family_state* ss, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K, Z = m->Z, T = d->num_terms;
    if (st->doc_terms != T || st->doc_index != d->index || st->expected.size() < static_cast<size_t>(K) * T * Z) {
      return Fail(err, TRIB_ERR_INTERNAL, "accumulate called without score on the same document");
    }
    std::vector<uint32_t> active;
    for (uint32_t k = 0; k < K; ++k) {
      if (w[k] != 0.0) active.push_back(k);
    }
    if (active.empty()) return TRIB_OK;
    const size_t na = active.size();
    const size_t need = delta->size + na * (static_cast<size_t>(T) * Z + 1);
    if (need > delta->capacity && delta->grow(delta, need) != 0) {
      return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow delta to %zu entries", need);
    }
    uint64_t* index = delta->index;
    double* value = delta->value;
    size_t p = delta->size;
    for (uint32_t k : active) {
      index[p] = k;
      value[p++] = w[k];
    }
    const double* expected = st->expected.data();
    for (uint32_t j = 0; j < T; ++j) {
      const uint64_t row = m->Row(d->term_ids[j]);
      for (uint32_t k : active) {
        const double* e = expected + (static_cast<size_t>(k) * T + j) * Z;
        const uint64_t base = row + static_cast<uint64_t>(k) * Z;
        for (uint32_t z = 0; z < Z; ++z) {
          index[p] = base + z;
          value[p++] = w[k] * e[z];
        }
      }
    }
    delta->size = p;
    return TRIB_OK;
  });
}

// Check-step (Algorithm 5 lines 16/23, Algorithm 6 line 6: max(., 0) on the
// data part) on the touched entries, and the totals (Algorithm 6 line 7).
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step*, trib_error*) {
  Model* m = M(mm);
  const uint64_t off = m->word_offset;
  const uint64_t CZ = static_cast<uint64_t>(m->C) * m->Z;
  double* raw = s->raw;
  double* total = m->raw_word_total.data();
  double class_total = m->raw_class_total;
  const double cfloor = -s->blocks[0].alpha_bar, wfloor = -s->blocks[1].alpha_bar;
  for (size_t j = 0; j < count; ++j) {
    const uint64_t i = idx[j];
    const double floor = i < off ? cfloor : wfloor;
    const double v = raw[i] > floor ? raw[i] : floor;
    raw[i] = v;
    if (i < off) {
      class_total += v - old_raw[j];
    } else {
      total[(i - off) % CZ] += v - old_raw[j];  // < K*Z: accumulate writes no padding
    }
  }
  m->raw_class_total = class_total;
  return TRIB_OK;
}

int GrowClasses(const trib_family_model* om, const trib_stats* os, trib_family_model* nm, trib_stats* ns,
                trib_error* err) {
  return Guard(err, [&] {
    const Model* o = M(om);
    const Model* n = M(nm);
    if (o->Z != n->Z || o->V != n->V || n->K <= o->K || n->C < n->K) {
      return Fail(err, TRIB_ERR_INTERNAL, "grow_classes: incompatible layouts");
    }
    for (uint32_t k = 0; k < o->K; ++k) ns->raw[k] = os->raw[k];
    const uint64_t okz = static_cast<uint64_t>(o->K) * o->Z;
    for (uint64_t w = 0; w < o->V; ++w) {
      const double* src = os->raw + o->Row(static_cast<uint32_t>(w));
      double* dst = ns->raw + n->Row(static_cast<uint32_t>(w));
      std::copy(src, src + okz, dst);
    }
    return TRIB_OK;
  });
}

// The next padded class comes into use (ABI 1.4): its statistics are raw zero
// (rebuild keeps padding there), so its topic totals are zero too. O(Z).
int AddClass(trib_family_model* mm, trib_stats*, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (m->K >= m->C) return Fail(err, TRIB_ERR_INTERNAL, "add_class: no room (capacity %u)", m->C);
    m->raw_word_total.resize(m->raw_word_total.size() + m->Z, 0.0);
    ++m->K;
    return TRIB_OK;
  });
}

// The running totals are kept incrementally by Commit; recomputing them in
// Rebuild sums in another order and differs in the last bits. Saving them in
// snapshots lets a resumed model continue exactly (ABI 1.1).
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  return tributary::sdk::ExportCache(out, size, M(mm)->raw_word_total, M(mm)->raw_class_total);
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  return tributary::sdk::ImportCache(in, size, err, "classes x topics + 1", M(mm)->raw_word_total,
                                     M(mm)->raw_class_total);
}

int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  *kind = TRIB_OUTPUTS_CLASSES;
  *count = M(mm)->K;
  return TRIB_OK;
}

}  // namespace

#ifndef TRIB_LDA_CLASSIFIER_VERSION
#define TRIB_LDA_CLASSIFIER_VERSION "1.1.0"
#endif
TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "lda-classifier", TRIB_LDA_CLASSIFIER_VERSION,
                             "one LDA per class (sdEM Appendix B), online collapsed Gibbs local step");

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  if (int rc = tributary::sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  trib_family_vtable& v = out->family;
  v.create = Create;
  v.layout = Layout;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.grow_classes = GrowClasses;
  v.add_class = AddClass;
  v.export_cache = ExportCache;
  v.import_cache = ImportCache;
  v.outputs = Outputs;
  return TRIB_OK;
}
