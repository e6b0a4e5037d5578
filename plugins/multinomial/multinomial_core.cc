// The multinomial families' shared implementation (multinomial_core.h): the
// model's creation, layout and rebuild, the growth of its classes and terms,
// the caches, the mixture's entries and Init. Score, the frozen table and the
// step are in multinomial_score.cc, multinomial_frozen.cc and
// multinomial_step.cc (multinomial_model.h).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "multinomial_core.h"
#include "multinomial_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::multinomial {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;

namespace sdk = tributary::sdk;

int Create(Variant variant, const trib_schema* schema, const trib_option* opts, size_t n, trib_family_model** out,
           trib_error* err) {
  return Guard(err, [&] {
    const uint64_t room =
        schema->struct_size > offsetof(trib_schema, vocab_capacity) ? schema->vocab_capacity : uint64_t{0};
    if (schema->vocab_size == 0 && room == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                  "multinomial needs a vocabulary (vocab_size is 0), or room for terms (open vocabulary)");
    }
    auto m = std::make_unique<Model>();
    m->V = schema->vocab_size;
    m->Vcap = std::max(m->V, room);
    m->sentinel = room > 0;
    const bool mixture = variant == Variant::kMixture;
    if (!mixture) {  // the mixture's K is its option components; classes only label documents
      if (schema->num_classes == 0 && schema->class_capacity == 0) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "multinomial needs >= 1 class, or room for classes (open classes)");
      }
      m->K = schema->num_classes;
    }
    const trib_option_spec* table = mixture ? kMixtureOptions : kNaiveBayesOptions;
    const char* family = mixture ? "multinomial-mixture" : "multinomial";
    sdk::OptionValues o;
    if (int rc = sdk::ParseOptions(table, TRIB_KIND_FAMILY, family, opts, n, &o, err); rc != TRIB_OK) return rc;
    if (mixture) {
      m->K = o.Integer<uint32_t>("components");
      m->init_scale = o.Number("init_scale");
    }
    if (o.Is("prior", "laplace")) {
      m->alpha = 1.0;
    } else if (o.Is("prior", "log")) {
      if (room > 0) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                    "option prior=log (alpha = ln |W|) needs a closed vocabulary: with an open one |W| grows as "
                    "the stream goes; give a number (e.g. prior=1)");
      }
      m->alpha = std::log(static_cast<double>(m->V));  // the paper's P2: ln |W|
    } else {
      m->alpha = o.Number("prior");
    }
    m->class_alpha = o.Number("class_prior");
    m->prior_floor = o.Is("floor", "prior");
    if (m->alpha <= 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "prior alpha = ln|W| is %g for |W| = %llu; expected > 0", m->alpha,
                  static_cast<unsigned long long>(m->V));
    }
    m->S = m->K;
    if (!mixture && schema->struct_size > offsetof(trib_schema, class_capacity)) {
      m->S = std::max(m->K, schema->class_capacity);
    }
    m->word_offset = m->S;
    m->raw_word_total.reserve(m->S);
    m->raw_word_total.assign(m->K, 0.0);
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
  blocks[0] = trib_block{0, m->S, 0.0, m->class_alpha, 1.0, 0.0};
  blocks[1] = trib_block{m->word_offset, m->Rows() * m->S, 0.0, m->alpha, 1.0, 0.0};
  *num = 2;
  return TRIB_OK;
}

int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step*, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    m->raw_class_total = 0;
    const double cfloor = -s->blocks[0].alpha_bar, wfloor = -s->blocks[1].alpha_bar;
    // The padding classes K .. S-1 get the check-step too, as a class never
    // seen would: they hold what a class declared from the start and never
    // seen holds now, which add_class brings into use (only the classes in
    // use count in the totals).
    for (uint32_t k = 0; k < m->S; ++k) {
      s->raw[k] = std::max(s->raw[k], cfloor);
      if (k < m->K) m->raw_class_total += s->raw[k];
    }
    std::fill(m->raw_word_total.begin(), m->raw_word_total.end(), 0.0);
    double* r = s->raw + m->word_offset;
    // Every row gets the check-step, the padding rows and the sentinel too
    // (as a term never seen would); only the vocabulary's rows count in R[k].
    for (uint64_t w = 0; w < m->Rows(); ++w) {
      double* row = r + w * m->S;
      for (uint32_t k = 0; k < m->S; ++k) row[k] = std::max(row[k], wfloor);
      if (w < m->V) {
        for (uint32_t k = 0; k < m->K; ++k) m->raw_word_total[k] += row[k];
      }
    }
    return TRIB_OK;
  });
}

int StateCreate(const trib_family_model*, uint64_t, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    *out = reinterpret_cast<trib_family_state*>(st);
    return TRIB_OK;
  });
}

// ---- Naive Bayes (labelled classes) ------------------------------------------

int GrowClasses(const trib_family_model* om, const trib_stats* os, trib_family_model* nm, trib_stats* ns,
                trib_error* err) {
  return Guard(err, [&] {
    const Model* o = M(om);
    const Model* n = M(nm);
    if (n->V != o->V || n->Rows() != o->Rows() || n->K <= o->K || n->S < n->K) {
      return Fail(err, TRIB_ERR_INTERNAL, "grow_classes: incompatible layouts");
    }
    // The old classes, then for every new class (the one being added and
    // the new padding) what the old model's spare padding class holds: a
    // class never seen (the host keeps one spare; a model without one, from
    // an older snapshot, leaves them at raw zero).
    const bool spare = o->S > o->K;
    for (uint32_t k = 0; k < n->S; ++k) ns->raw[k] = k < o->K ? os->raw[k] : spare ? os->raw[o->K] : 0.0;
    // Every row: the vocabulary's, and an open vocabulary's padding and
    // sentinel (what a term never seen holds, for each old class).
    for (uint64_t w = 0; w < o->Rows(); ++w) {
      const double* src = os->raw + o->word_offset + w * o->S;
      double* dst = ns->raw + n->word_offset + w * n->S;
      std::copy(src, src + o->K, dst);
      std::fill(dst + o->K, dst + n->S, spare ? src[o->K] : 0.0);
    }
    return TRIB_OK;
  });
}

// The next padded class comes into use (ABI 1.4): its statistics are what a
// class never seen holds (rebuild moves the padding as it moves any entry
// never touched), so it joins the totals: O(rows).
int AddClass(trib_family_model* mm, trib_stats* s, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (m->K >= m->S) return Fail(err, TRIB_ERR_INTERNAL, "add_class: no room (capacity %u)", m->S);
    const uint32_t k = m->K;
    m->raw_class_total += s->raw[k];
    double total = 0;
    const double* r = s->raw + m->word_offset;
    for (uint64_t w = 0; w < m->V; ++w) total += r[w * m->S + k];
    m->raw_word_total.push_back(total);  // (reserved for S classes at creation)
    ++m->K;
    return TRIB_OK;
  });
}

// ---- Open vocabulary (ABI 1.5) ------------------------------------------------

// The next padded terms come into use: each row becomes a copy of the
// sentinel's (what a term present from the start and never seen holds now;
// raw zero, N = scale alpha, until the block's first restart) and joins the
// totals R[k]; M[k] = scale R[k] + shift alpha |W| counts the new terms'
// prior mass through |W|. O(count x classes).
int AddTerms(trib_family_model* mm, trib_stats* s, uint64_t count, trib_error* err) {
  Model* m = M(mm);
  if (!m->sentinel || count > m->Vcap - m->V) {
    return Fail(err, TRIB_ERR_INTERNAL, "add_terms: %llu terms do not fit (%llu of %llu rows in use)",
                static_cast<unsigned long long>(count), static_cast<unsigned long long>(m->V),
                static_cast<unsigned long long>(m->Vcap));
  }
  double* r = s->raw + m->word_offset;
  const double* never = r + m->Vcap * m->S;
  for (uint64_t w = m->V; w < m->V + count; ++w) {
    std::copy(never, never + m->S, r + w * m->S);
    for (uint32_t k = 0; k < m->K; ++k) m->raw_word_total[k] += never[k];
  }
  m->V += count;
  return TRIB_OK;
}

// The word block is term-major with the same row stride in both layouts
// (classes and options are unchanged): the class block and the old rows are
// one copy; every other row of the new layout (the new terms, the padding,
// the sentinel) is a copy of the old sentinel. Rebuild then sums R[k].
int GrowTerms(const trib_family_model* om, const trib_stats* os, trib_family_model* nm, trib_stats* ns,
              trib_error* err) {
  return Guard(err, [&] {
    const Model* o = M(om);
    const Model* n = M(nm);
    if (n->S != o->S || n->K != o->K || n->V < o->V || n->word_offset != o->word_offset || !o->sentinel ||
        !n->sentinel) {
      return Fail(err, TRIB_ERR_INTERNAL, "grow_terms: incompatible layouts");
    }
    std::copy(os->raw, os->raw + o->word_offset + o->V * o->S, ns->raw);
    const double* never = os->raw + o->word_offset + o->Vcap * o->S;
    double* r = ns->raw + n->word_offset;
    for (uint64_t w = o->V; w < n->Rows(); ++w) std::copy(never, never + n->S, r + w * n->S);
    return TRIB_OK;
  });
}

// The running totals R[k] and sum_k raw C[k] are kept incrementally by
// Commit; recomputing them in Rebuild sums in another order and differs in the
// last bits. Saving them in snapshots lets a resumed model continue exactly
// as the uninterrupted one would (ABI 1.1 export_cache / import_cache).
// Finite, not necessarily >= 0 (e.g. -5e-16 for a class seen only early
// under NCLL): sdk::ImportCache's rule.
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  return sdk::ExportCache(out, size, M(mm)->raw_word_total, M(mm)->raw_class_total);
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  return sdk::ImportCache(in, size, err, "classes + 1", M(mm)->raw_word_total, M(mm)->raw_class_total);
}

// ---- Mixture of multinomials (latent class; online EM = sdEM with NLL) ------

int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  *kind = TRIB_OUTPUTS_LATENT;
  *count = M(mm)->K;
  return TRIB_OK;
}

// Symmetry breaking: every component starts at the prior plus a random
// fraction (init_scale x alpha x U(0, 1)) of pseudo-counts per term, so the
// first documents' posteriors p(k | x) differ between components.
int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    std::mt19937_64 rng(seed ^ 0x6d6978747572650aULL);
    const double scale = m->init_scale * m->alpha / s->blocks[1].scale;
    double* r = s->raw + m->word_offset;
    for (uint64_t i = 0; i < m->V * m->K; ++i) {
      r[i] = scale * static_cast<double>(rng() >> 11) * 0x1.0p-53;
    }
    return TRIB_OK;
  });
}

// p(w | k) = N[w][k] / M[k] for every term.
int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error*) {
  const Model* m = M(mm);
  const trib_block& b = s->blocks[1];
  const double total = b.scale * m->raw_word_total[k] + b.shift * m->alpha * static_cast<double>(m->V);
  for (uint64_t w = 0; w < m->V; ++w) {
    out[w] = (b.scale * s->raw[m->word_offset + w * m->S + k] + b.shift * m->alpha) / total;
  }
  return TRIB_OK;
}

// log p(heldout | observed) = sum_w n_w log sum_k p(k | observed) p(w | k).
int Completion(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* obs,
               const trib_document* held, double* log_prob, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    std::vector<double> post(m->K);
    int rc = Score(mm, s, ss, obs, post.data(), err);
    if (rc != TRIB_OK) return rc;
    const double lse = tributary::sdk::LogSumExp(post.data(), m->K);
    for (auto& p : post) p = std::exp(p - lse);
    const trib_block& b = s->blocks[1];
    std::vector<double> total(m->K);
    for (uint32_t k = 0; k < m->K; ++k) {
      total[k] = b.scale * m->raw_word_total[k] + b.shift * m->alpha * static_cast<double>(m->V);
    }
    double lp = 0;
    for (uint32_t i = 0; i < held->num_terms; ++i) {
      const double* row = s->raw + m->word_offset + uint64_t{held->term_ids[i]} * m->S;
      double p = 0;
      for (uint32_t k = 0; k < m->K; ++k) p += post[k] * (b.scale * row[k] + b.shift * m->alpha) / total[k];
      lp += held->term_counts[i] * std::log(p);
    }
    *log_prob = lp;
    return TRIB_OK;
  });
}

template <Variant V>
int CreateVariant(const trib_schema* schema, const trib_option* opts, size_t n, trib_family_model** out,
                  trib_error* err) {
  return Create(V, schema, opts, n, out, err);
}

}  // namespace

int Init(Variant variant, const trib_host_api* host, trib_plugin_vtable* out, trib_error* err) {
  if (int rc = tributary::sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  trib_family_vtable& v = out->family;
  v.create = variant == Variant::kMixture ? CreateVariant<Variant::kMixture> : CreateVariant<Variant::kNaiveBayes>;
  v.layout = Layout;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.fused_step = FusedStep;
  v.export_cache = ExportCache;
  v.import_cache = ImportCache;
  v.add_terms = AddTerms;
  v.grow_terms = GrowTerms;
  v.freeze = Freeze;
  v.frozen_destroy = FrozenDestroy;
  v.score_frozen = ScoreFrozen;
  if (variant == Variant::kMixture) {
    v.init_stats = InitStats;
    v.outputs = Outputs;
    v.component_terms = ComponentTerms;
    v.completion = Completion;
  } else {
    v.grow_classes = GrowClasses;
    v.add_class = AddClass;
  }
  return TRIB_OK;
}

}  // namespace tributary::multinomial
