// The document decoder's refusals that no single field shows: counts that are
// each finite but add up to infinity over repeated term ids (eval and predict
// used to pass them on; the server acknowledged them, then skipped them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"
#include "tributary/document.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

TEST(DecoderTest, RepeatedTermCountsThatAddUpToInfinityAreRefused) {
  v1::Schema proto = testing::TextSchema(10, 2);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok());
  auto dec = DocumentDecoder::Create(*schema, proto);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  v1::Document d;
  d.set_label("c0");
  for (int i = 0; i < 3; ++i) {
    d.add_term_ids(4);
    d.add_term_counts(1e308);
  }
  DocumentBuffer buf;
  Status st = dec->Decode(d, 17, *schema, false, &buf, nullptr, nullptr);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("term id 4"));
  EXPECT_THAT(st.message(), HasSubstr("expected a finite total"));
  // Large but finite totals are fine.
  d.set_term_counts(0, 1.0);
  d.set_term_counts(1, 1.0);
  ASSERT_TRUE(dec->Decode(d, 17, *schema, false, &buf, nullptr, nullptr).ok());
  EXPECT_EQ(buf.term_counts.size(), 1u);
  EXPECT_EQ(buf.term_counts[0], 1e308 + 2.0);
}

}  // namespace
}  // namespace tributary
