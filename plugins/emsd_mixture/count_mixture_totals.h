// The posterior totals T_k, U_k of the shapes between refreshes: the
// series moments and the exact terms of each component's frame (see
// count_mixture.h, header comment, "Totals").
#ifndef TRIBUTARY_PLUGINS_COUNT_MIXTURE_TOTALS_H_
#define TRIBUTARY_PLUGINS_COUNT_MIXTURE_TOTALS_H_

#include <cstdint>

#include "count_mixture.h"

namespace tributary::count_mixture {

// Reference values of a term with current shape a, rate b and prior (a0,
// b0) in the frame of component k (header comment, "Totals"): a = a0 + D x,
// b = b0 + D y + Delta, and b' = b0 + y.
struct Ref {
  double x, y, ar, br;
};
Ref RefOf(const Model& m, uint32_t k, double a, double b, double a0, double b0);

// Adds (sign +1) or removes (-1) a term to / from the series moments of
// component k. Returns false if b' is not > 0 (the series cannot represent
// the term: the caller refreshes the component).
bool SeriesTerm(Model* m, uint32_t k, const Ref& r, double sign);

// The slot of term w among the exact terms of component k, or -1.
int ExactSlot(const Model& m, uint32_t k, uint64_t w);
void ExactRemove(Model* m, uint32_t k, int slot);
// Adds a term: to the exact terms if its reference rate is below the
// threshold and there is room, else to the series.
bool AddTerm(Model* m, uint32_t k, uint64_t w, double a, double b, double a0, double b0);

// T_k and U_k at the frame's (D, Delta): the series plus the exact terms;
// false if the error bound exceeds kTolMean T or kTolVar U.
bool FrameTotals(Model* m, uint32_t k);

// Recomputes the moments and exact terms of component k from all statistics
// (O(V)) and restarts its frame (D = 1, Delta = 0); checks feasibility.
int RefreshComponent(Model* m, const trib_stats& s, uint32_t k, trib_error* err);

// Recomputes all components (O(K V)).
int RefreshTotals(Model* m, const trib_stats& s, trib_error* err);

}  // namespace tributary::count_mixture

#endif  // TRIBUTARY_PLUGINS_COUNT_MIXTURE_TOTALS_H_
