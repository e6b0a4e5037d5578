// One document in the model's id space (document.h): DocumentBuffer (with
// Canonicalize's sort), the name every error message gives a document, and
// the split for document completion.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tributary/document.h"
#include "tributary/simd.h"
#include "tributary/utf8.h"

namespace tributary {

std::string DocumentName(uint64_t index, const std::string& id) {
  std::string s = "document #" + std::to_string(index);
  // The id as given, escaped where it is not printable UTF-8 (an error
  // message must not carry a client's terminal escapes or invalid bytes).
  if (!id.empty()) s += " (id '" + Printable(id, 128) + "')";
  return s;
}

void DocumentBuffer::Clear() {
  index = 0;
  id.clear();
  label = -1;
  term_ids.clear();
  term_counts.clear();
  reals.clear();
  categoricals.clear();
  weight = 1.0;
  real_missing.clear();
  categorical_missing.clear();
  new_terms.clear();
  terms_over_limit = 0;
  limit_refusal = LimitRefusal::kNone;
}

namespace {

// Canonicalize's sort for 9 .. kRankMax entries: each entry goes to its rank,
// the number of entries before it in the order (smaller ids, and equal ids
// that come first). Eight entries' ranks at a time (sixteen with AVX-512),
// one lane each: every entry j is compared with the eight at once, without a
// branch (the keys below). Compiled for the x86-64 baseline, for AVX2 (the
// eight lanes in one register) and for AVX-512 (sixteen), chosen once at
// start-up; all give the same permutation.
constexpr size_t kRankMax = 128;

// Eight int32 lanes (GCC vector extensions: one AVX2 register, two SSE2 ones),
// and sixteen (one AVX-512 register); a comparison gives -1 in the lanes
// where it holds.
using Lanes8 = int32_t __attribute__((vector_size(32)));
using Lanes16 = int32_t __attribute__((vector_size(64)));

// With ids below 2^24 (every vocabulary of fewer than 16.7M terms) the keys
// are made unique, id * 128 + position: an entry's rank is then the number
// of smaller keys, one comparison per pair. Otherwise ties are counted apart
// (equal ids that come first), ids compared as signed after flipping the top
// bit.
#define TRIB_RANK_SORT_BODY(L, Lanes, LANE_INDEX)                                                              \
  alignas(64) int32_t keys[kRankMax];                                                                          \
  double old_counts[kRankMax];                                                                                 \
  uint32_t high = 0;                                                                                           \
  for (size_t i = 0; i < n; ++i) high |= ids[i];                                                               \
  const bool unique = high < (1u << 24);                                                                       \
  for (size_t i = 0; i < n; ++i) {                                                                             \
    keys[i] = unique ? static_cast<int32_t>((ids[i] << 7) | static_cast<uint32_t>(i))                          \
                     : static_cast<int32_t>(ids[i] ^ 0x80000000u);                                             \
  }                                                                                                            \
  for (size_t i = n; i < (n + L - 1) / L * L; ++i) keys[i] = 0; /* lanes past n: never stored */               \
  std::copy(counts, counts + n, old_counts);                                                                   \
  const Lanes lane = LANE_INDEX;                                                                               \
  for (size_t b = 0; b < n; b += L) {                                                                          \
    Lanes key;                                                                                                 \
    std::memcpy(&key, keys + b, sizeof(key));                                                                  \
    Lanes rank = {};                                                                                           \
    if (unique) {                                                                                              \
      Lanes other = {}; /* two sums: two short dependency chains */                                            \
      size_t j = 0;                                                                                            \
      for (; j + 2 <= n; j += 2) {                                                                             \
        rank -= ((Lanes{} + keys[j]) < key);                                                                   \
        other -= ((Lanes{} + keys[j + 1]) < key);                                                              \
      }                                                                                                        \
      if (j < n) rank -= ((Lanes{} + keys[j]) < key);                                                          \
      rank += other;                                                                                           \
    } else {                                                                                                   \
      Lanes tied = {};                                                                                         \
      for (size_t j = 0; j < n; ++j) {                                                                         \
        const Lanes kj = Lanes{} + keys[j];                                                                    \
        const Lanes before = Lanes{} + (static_cast<int32_t>(j) - static_cast<int32_t>(b));                    \
        rank -= (kj < key);                                                                                    \
        tied -= (kj == key) & (before < lane);                                                                 \
      }                                                                                                        \
      rank += tied;                                                                                            \
    }                                                                                                          \
    const size_t lanes = std::min<size_t>(L, n - b);                                                           \
    for (size_t l = 0; l < lanes; ++l) {                                                                       \
      ids[rank[l]] =                                                                                           \
          unique ? static_cast<uint32_t>(keys[b + l]) >> 7 : static_cast<uint32_t>(keys[b + l]) ^ 0x80000000u; \
      counts[rank[l]] = old_counts[b + l];                                                                     \
    }                                                                                                          \
  }

#define TRIB_LANES8 \
  { 0, 1, 2, 3, 4, 5, 6, 7 }
#define TRIB_LANES16 \
  { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 }

void RankSortBaseline(uint32_t* ids, double* counts, size_t n) { TRIB_RANK_SORT_BODY(8, Lanes8, TRIB_LANES8) }

#if defined(__x86_64__)
__attribute__((target("avx2"))) void RankSortAvx2(uint32_t* ids, double* counts, size_t n) {
  TRIB_RANK_SORT_BODY(8, Lanes8, TRIB_LANES8)
}
__attribute__((target("avx512f"))) void RankSortAvx512(uint32_t* ids, double* counts, size_t n) {
  TRIB_RANK_SORT_BODY(16, Lanes16, TRIB_LANES16)
}
#endif
#undef TRIB_RANK_SORT_BODY
#undef TRIB_LANES8
#undef TRIB_LANES16

using RankSortFn = void (*)(uint32_t*, double*, size_t);
const RankSortFn kRankSort =
#if defined(__x86_64__)
    simd::MaxLevel() >= simd::kAvx512 ? RankSortAvx512
    : simd::MaxLevel() >= simd::kAvx2 ? RankSortAvx2
                                      :
#endif
                                      RankSortBaseline;

}  // namespace

bool DocumentBuffer::Canonicalize() {
  const size_t n = term_ids.size();
  bool sorted = true;
  for (size_t i = 1; i < n; ++i) {
    if (term_ids[i] <= term_ids[i - 1]) {
      sorted = false;
      break;
    }
  }
  if (sorted) return false;
  // A stable sort of the (id, count) pairs, then repeats summed in place in
  // their order of occurrence (the sums' rounding is part of the result).
  // Neither allocates once the thread's buffers are warm:
  // - up to 8 entries: insertion sort in place;
  // - up to kRankMax (most documents): RankSort, branch-free;
  // - longer: std::sort of unique (id, position) keys, so stable.
  uint32_t* ids = term_ids.data();
  double* counts = term_counts.data();
  constexpr size_t kInsertionMax = 8;
  if (n <= kInsertionMax) {
    for (size_t i = 1; i < n; ++i) {
      const uint32_t key = ids[i];
      const double c = counts[i];
      size_t j = i;
      for (; j > 0 && ids[j - 1] > key; --j) {
        ids[j] = ids[j - 1];
        counts[j] = counts[j - 1];
      }
      ids[j] = key;
      counts[j] = c;
    }
  } else if (n <= kRankMax) {
    kRankSort(ids, counts, n);
  } else {
    thread_local std::vector<uint64_t> keys;
    thread_local std::vector<double> old_counts;
    keys.resize(n);
    old_counts.assign(counts, counts + n);
    for (size_t i = 0; i < n; ++i) keys[i] = (uint64_t{ids[i]} << 32) | i;
    std::sort(keys.begin(), keys.end());
    for (size_t i = 0; i < n; ++i) {
      ids[i] = static_cast<uint32_t>(keys[i] >> 32);
      counts[i] = old_counts[keys[i] & 0xffffffffu];
    }
  }
  size_t w = 0;
  for (size_t r = 0; r < n; ++r) {
    if (w > 0 && ids[w - 1] == ids[r]) {
      counts[w - 1] += counts[r];
    } else {
      ids[w] = ids[r];
      counts[w] = counts[r];
      ++w;
    }
  }
  const bool merged = w < n;
  term_ids.resize(w);
  term_counts.resize(w);
  return merged;
}

double DocumentBuffer::TotalCount() const {
  double s = 0;
  for (double c : term_counts) s += c;
  return s;
}

trib_document DocumentBuffer::View() const {
  trib_document d{};
  d.struct_size = sizeof(trib_document);
  d.index = index;
  d.id = id.c_str();
  d.label = label;
  d.num_terms = static_cast<uint32_t>(term_ids.size());
  d.term_ids = term_ids.data();
  d.term_counts = term_counts.data();
  d.total_count = TotalCount();
  d.num_reals = static_cast<uint32_t>(reals.size());
  d.reals = reals.data();
  d.num_categoricals = static_cast<uint32_t>(categoricals.size());
  d.categoricals = categoricals.data();
  d.weight = weight;
  d.real_missing = real_missing.empty() ? nullptr : real_missing.data();
  d.categorical_missing = categorical_missing.empty() ? nullptr : categorical_missing.data();
  return d;
}

std::string DocumentBuffer::Name() const { return DocumentName(index, id); }

void SplitForCompletion(const trib_document& doc, DocumentBuffer* observed, DocumentBuffer* heldout) {
  for (DocumentBuffer* b : {observed, heldout}) {
    b->Clear();
    b->index = doc.index;
    b->id = doc.id ? doc.id : "";
    b->label = doc.label;
    b->weight = doc.weight;
    b->reals.assign(doc.reals, doc.reals + doc.num_reals);
    b->categoricals.assign(doc.categoricals, doc.categoricals + doc.num_categoricals);
    if (doc.real_missing) b->real_missing.assign(doc.real_missing, doc.real_missing + doc.num_reals);
    if (doc.categorical_missing) {
      b->categorical_missing.assign(doc.categorical_missing, doc.categorical_missing + doc.num_categoricals);
    }
  }
  uint64_t position = 0;  // of the term's first token in the ordered expansion
  for (uint32_t i = 0; i < doc.num_terms; ++i) {
    const uint64_t n = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(doc.term_counts[i])));
    // Positions position .. position + n - 1: the even ones are observed.
    const uint64_t even = (position % 2 == 0) ? (n + 1) / 2 : n / 2;
    const uint64_t odd = n - even;
    if (even > 0) {
      observed->term_ids.push_back(doc.term_ids[i]);
      observed->term_counts.push_back(static_cast<double>(even));
    }
    if (odd > 0) {
      heldout->term_ids.push_back(doc.term_ids[i]);
      heldout->term_counts.push_back(static_cast<double>(odd));
    }
    position += n;
  }
}

}  // namespace tributary
