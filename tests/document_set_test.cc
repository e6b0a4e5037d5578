// DocumentSet (lib/include/tributary/document.h): documents kept in memory
// for several passes.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tributary/document.h"

namespace tributary {
namespace {

DocumentBuffer Random(uint64_t index, std::mt19937_64* rng, size_t max_terms) {
  DocumentBuffer d;
  d.index = index;
  d.id = index % 3 == 0 ? "" : "doc-" + std::to_string(index);
  d.label = static_cast<int64_t>((*rng)() % 5) - 1;  // -1 = unlabelled
  const size_t n = (*rng)() % (max_terms + 1);
  uint32_t t = 0;
  for (size_t i = 0; i < n; ++i) {
    t += 1 + static_cast<uint32_t>((*rng)() % 7);
    d.term_ids.push_back(t);
    d.term_counts.push_back(1.0 + static_cast<double>((*rng)() % 4));
  }
  const size_t r = (*rng)() % 3;
  for (size_t i = 0; i < r; ++i) d.reals.push_back(static_cast<double>((*rng)() % 1000) / 7.0);
  const size_t c = (*rng)() % 3;
  for (size_t i = 0; i < c; ++i) d.categoricals.push_back(static_cast<uint32_t>((*rng)() % 9));
  if (r > 0 && (*rng)() % 2) d.real_missing.assign(r, 0), d.real_missing[0] = 1;
  if (c > 0 && (*rng)() % 2) d.categorical_missing.assign(c, 1);
  d.weight = 0.5 + static_cast<double>((*rng)() % 3);
  return d;
}

void ExpectSame(const DocumentBuffer& want, const trib_document& got) {
  const trib_document w = want.View();
  EXPECT_EQ(got.struct_size, sizeof(trib_document));
  EXPECT_EQ(got.index, w.index);
  EXPECT_STREQ(got.id, w.id);
  EXPECT_EQ(got.label, w.label);
  EXPECT_EQ(got.total_count, w.total_count);
  EXPECT_EQ(got.weight, w.weight);
  ASSERT_EQ(got.num_terms, w.num_terms);
  for (uint32_t i = 0; i < w.num_terms; ++i) {
    EXPECT_EQ(got.term_ids[i], w.term_ids[i]);
    EXPECT_EQ(got.term_counts[i], w.term_counts[i]);
  }
  ASSERT_EQ(got.num_reals, w.num_reals);
  for (uint32_t i = 0; i < w.num_reals; ++i) EXPECT_EQ(got.reals[i], w.reals[i]);
  ASSERT_EQ(got.num_categoricals, w.num_categoricals);
  for (uint32_t i = 0; i < w.num_categoricals; ++i) EXPECT_EQ(got.categoricals[i], w.categoricals[i]);
  ASSERT_EQ(got.real_missing == nullptr, w.real_missing == nullptr);
  for (uint32_t i = 0; w.real_missing && i < w.num_reals; ++i) EXPECT_EQ(got.real_missing[i], w.real_missing[i]);
  ASSERT_EQ(got.categorical_missing == nullptr, w.categorical_missing == nullptr);
  for (uint32_t i = 0; w.categorical_missing && i < w.num_categoricals; ++i) {
    EXPECT_EQ(got.categorical_missing[i], w.categorical_missing[i]);
  }
  // Term arrays are aligned for their type.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.term_counts) % alignof(double), 0u);
}

// Every field comes back as it went in, across many storage chunks and
// record blocks (past the 16 MiB after which the set asks for huge pages),
// and views taken early stay valid while the set grows.
TEST(DocumentSetTest, ViewsEqualTheDocumentsAndStayValid) {
  std::mt19937_64 rng(7);
  std::vector<DocumentBuffer> docs;
  DocumentSet set;
  std::vector<trib_document> early;
  for (uint64_t i = 0; i < 40000; ++i) {
    docs.push_back(Random(i, &rng, 60));
    set.Add(docs.back());
    if (i < 10) early.push_back(set.View(i));
  }
  // One document larger than a storage chunk (4 MiB).
  DocumentBuffer big;
  big.index = 40000;
  big.label = 2;
  for (uint32_t t = 0; t < 400000; ++t) {
    big.term_ids.push_back(t);
    big.term_counts.push_back(1.0);
  }
  docs.push_back(big);
  set.Add(big);
  docs.push_back(Random(40001, &rng, 5));
  set.Add(docs.back());
  ASSERT_EQ(set.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSame(docs[i], set.View(i));
    EXPECT_EQ(set.label(i), docs[i].label);
    EXPECT_EQ(set.Name(i), docs[i].Name());
    set.PrefetchRecord(i);
    set.Prefetch(i);
  }
  for (size_t i = 0; i < early.size(); ++i) ExpectSame(docs[i], early[i]);
  EXPECT_GT(set.bytes(), 400000 * (sizeof(uint32_t) + sizeof(double)));
  EXPECT_GT(set.bytes(), size_t{24} << 20);
  // Moving the set keeps its views.
  DocumentSet moved = std::move(set);
  ExpectSame(docs[5], moved.View(5));
  ExpectSame(docs[40000], moved.View(40000));
}

TEST(DocumentSetTest, EmptyDocumentsAndEmptySet) {
  DocumentSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.bytes(), 0u);
  DocumentBuffer d;
  d.index = 4;
  d.id = "only-features";
  d.reals = {1.5};
  set.Add(d);
  ASSERT_EQ(set.size(), 1u);
  const trib_document v = set.View(0);
  EXPECT_EQ(v.num_terms, 0u);
  EXPECT_EQ(v.num_reals, 1u);
  EXPECT_EQ(v.reals[0], 1.5);
  EXPECT_EQ(set.Name(0), "document #4 (id 'only-features')");
}

}  // namespace
}  // namespace tributary
