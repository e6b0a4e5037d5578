// The multinomial families' model and per-thread state, and the entry points
// that the files of their implementation (multinomial_core.h's header comment
// explains the statistics) call across files:
//   multinomial_core.cc    creation, layout, rebuild, growth (classes, terms),
//                          caches, the mixture's entries and Init
//   multinomial_score.cc   score (Algorithm 3): one log per class, not per term
//   multinomial_frozen.cc  the frozen table (ABI 1.6): the logs taken once per model
//   multinomial_step.cc    accumulate, commit (the check-step) and the fused step
// The vector kernels they share are in multinomial_vector.h. Everything else
// stays file-local.
#ifndef TRIBUTARY_PLUGINS_MULTINOMIAL_MODEL_H_
#define TRIBUTARY_PLUGINS_MULTINOMIAL_MODEL_H_

#include <cstdint>
#include <vector>

#include "tributary/plugin_sdk.h"

#if defined(__clang__)
// No contraction of a * b + c into FMA in the family's kernels (see
// SumRowsAvx512, multinomial_frozen.cc): GCC's optimize attribute does it per
// function there. Here for every file of the implementation, as it was when
// they were one file.
#pragma STDC FP_CONTRACT OFF
#endif

namespace tributary::multinomial {

struct Model {
  uint32_t K = 0;
  // Row stride and size of the class block: the class capacity (ABI 1.4,
  // >= K); the entries of classes K .. S-1 are padding: classes never seen
  // (rebuild moves them as any entry never touched), brought into use by
  // add_class.
  uint32_t S = 0;
  uint64_t V = 0;
  // Rows of the word block: the vocabulary capacity (ABI 1.5, >= V) and, for
  // an open vocabulary, one more: the sentinel, row Vcap, a term that never
  // occurs. Block restarts and rebuild move it as they move any term never
  // seen, so it holds what a term present from the start and never seen
  // holds now: a new term's row is a copy of it (add_terms, grow_terms). The
  // rows V .. Vcap-1 are padding, copies of it too, never scored.
  uint64_t Vcap = 0;
  bool sentinel = false;
  uint64_t Rows() const { return Vcap + (sentinel ? 1 : 0); }
  double alpha = 1.0;                  // word pseudo-count
  double class_alpha = 1.0;            // class pseudo-count
  uint64_t word_offset = 0;            // = S
  std::vector<double> raw_word_total;  // R[k] = sum_w raw N[w][k]
  double raw_class_total = 0;          // sum_k raw C[k]
  double init_scale = 1.0;             // mixture: random initial counts, in units of alpha
  // floor=prior (1.0.0's check-step, kept as an option): discriminative steps
  // (c = 0) never take a count below its initial pseudo-count (raw >= 0).
  bool prior_floor = false;
};

struct State {
  // Score's scratch: the rows of the document's factors (a term with a small
  // integer count once per occurrence), the rows of its other terms and their
  // counts.
  std::vector<const double*> rows;
  std::vector<const double*> other_rows;
  std::vector<double> counts;
  std::vector<double> prod;    // P_k (see Score)
  std::vector<uint64_t> expo;  // E_k
};

inline Model* M(trib_family_model* m) { return tributary::sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return tributary::sdk::As<Model>(m); }

// ---- Score (multinomial_score.cc) ---------------------------------------------

int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d, double* out,
          trib_error* err);

// ---- Frozen scoring (multinomial_frozen.cc) -------------------------------------

int Freeze(const trib_family_model* mm, const trib_stats* s, trib_frozen** out, trib_error* err);
void FrozenDestroy(trib_frozen* f);
int ScoreFrozen(const trib_family_model*, const trib_frozen* ff, trib_family_state* ss, const trib_document* d,
                double* out, trib_error* err);

// ---- The step (multinomial_step.cc) ---------------------------------------------

int Accumulate(const trib_family_model* mm, const trib_stats*, trib_family_state*, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err);
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step* step, trib_error*);
int FusedStep(trib_family_model* mm, trib_stats* s, trib_family_state*, const trib_document* d, const double* w,
              const double* block_mult, const trib_step* step, trib_step_log* log, trib_error* err);

}  // namespace tributary::multinomial

#endif  // TRIBUTARY_PLUGINS_MULTINOMIAL_MODEL_H_
