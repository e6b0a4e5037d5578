// The "lda" family's entry points that its files share: lda.cc (creation,
// layout, rebuild, score, completion, the caches and the plugin's vtable; its
// header comment explains the family), lda_step.cc (accumulate, commit and
// learn_alpha's refit) and lda_fused.cc (the fused step). The model, the state
// and the local steps are in lda_model.h.
#ifndef TRIBUTARY_PLUGINS_LDA_LDA_FAMILY_H_
#define TRIBUTARY_PLUGINS_LDA_LDA_FAMILY_H_

#include <cstddef>
#include <cstdint>

#include "lda_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::lda {

inline Model* M(trib_family_model* m) { return tributary::sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return tributary::sdk::As<Model>(m); }

// ---- The step (lda_step.cc) -------------------------------------------------------

// learn_alpha (symmetric): the check-step of the E[log theta] statistic and
// alpha refitted to it; alpha_shape=asymmetric: the fit once, unless a cache
// (or an earlier fit) holds it. TRIB_OK without learn_alpha.
int RefitAlpha(Model* m, trib_stats* s, trib_error* err);

int Accumulate(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err);
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step* step, trib_error* err);

// ---- The fused step (lda_fused.cc) ------------------------------------------------

int FusedStep(trib_family_model* mm, trib_stats* s, trib_family_state* ss, const trib_document* d, const double* w,
              const double* block_mult, const trib_step* step, trib_step_log* log, trib_error* err);

}  // namespace tributary::lda

#endif  // TRIBUTARY_PLUGINS_LDA_LDA_FAMILY_H_
