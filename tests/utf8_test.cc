// The one UTF-8 rule (tributary/utf8.h) and the decoder's use of it: a
// document whose id, label, text or tokens are not UTF-8 is refused by
// Decode (so by every way in that learns: the server's admission, the broker
// sources, LiveModel), naming the field and the byte, and the refusal never
// carries the raw bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/utf8.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Utf8Test, InvalidSequencesAreFoundWhereTheyStart) {
  constexpr size_t npos = std::string_view::npos;
  EXPECT_EQ(InvalidUtf8At(""), npos);
  EXPECT_EQ(InvalidUtf8At("plain ascii text, longer than eight bytes"), npos);
  EXPECT_EQ(InvalidUtf8At("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"), npos);  // 2, 3, 4 bytes
  EXPECT_EQ(InvalidUtf8At(std::string("abc\xff", 4)), 3u);
  EXPECT_EQ(InvalidUtf8At("0123456789abcdef\xc3"), 16u);            // cut after the ASCII blocks
  EXPECT_EQ(InvalidUtf8At("ok \xc0\x80"), 3u);                      // overlong NUL
  EXPECT_EQ(InvalidUtf8At("ok \xed\xa0\x80 surrogate"), 3u);        // U+D800
  EXPECT_EQ(InvalidUtf8At("\xf4\x90\x80\x80 above U+10FFFF"), 0u);  // U+110000
  EXPECT_EQ(InvalidUtf8At("\x80 lone continuation"), 0u);
  EXPECT_EQ(InvalidUtf8At(std::string("nul \0 is valid", 14)), npos);
}

TEST(Utf8Test, ErrorsNameTheByteAndTheSize) {
  EXPECT_EQ(Utf8Error("fine"), "");
  EXPECT_EQ(Utf8Error(std::string("lab\xff", 4)), "expected UTF-8, found an invalid byte 0xff at byte 3 (of 4)");
}

TEST(Utf8Test, PrintableEscapesControlsAndInvalidBytesAndCuts) {
  EXPECT_EQ(Printable("caf\xc3\xa9 ok"), "caf\xc3\xa9 ok");
  EXPECT_EQ(Printable("\x1b[31mred"), "\\x1b[31mred");  // ESC never reaches a terminal
  EXPECT_EQ(Printable(std::string("a\xff"
                                  "b",
                                  3)),
            "a\\xffb");
  EXPECT_EQ(Printable("\xc2\x9b"
                      "c1"),
            "\\xc2\\x9bc1");  // U+009B, a C1 control (CSI)
  EXPECT_EQ(Printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(Printable(std::string(300, 'x'), 8), "xxxxxxxx... (300 bytes)");
  EXPECT_EQ(Printable("\xe6\x97\xa5\xe6\x97\xa5", 4), "\xe6\x97\xa5\\xe6... (6 bytes)");  // no cut sequence
}

// Every string field of a document, one at a time: refused with the field,
// the byte, and no raw byte in the message.
TEST(Utf8Test, TheDecoderRefusesEveryFieldThatIsNotUtf8) {
  v1::Schema proto;
  proto.set_hashed_dim(64);
  proto.set_open_classes(true);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok());
  auto dec = DocumentDecoder::ForModel(*schema);
  ASSERT_TRUE(dec.ok());
  const std::string bad("x\xfey", 3);
  struct Case {
    const char* field;
    void (*set)(v1::Document*, const std::string&);
  };
  const Case cases[] = {
      {"field 'id'", [](v1::Document* d, const std::string& v) { d->set_id(v); }},
      {"field 'label'", [](v1::Document* d, const std::string& v) { d->set_label(v); }},
      {"field 'text'", [](v1::Document* d, const std::string& v) { d->set_text("words and " + v); }},
      {"tokens[1]", [](v1::Document* d, const std::string& v) { d->add_tokens(v); }},
  };
  for (const Case& c : cases) {
    v1::Document d;
    d.set_id("doc");
    d.set_label("ok");
    d.add_tokens("fine");
    DocumentBuffer buf;
    std::string new_class;
    ASSERT_TRUE(dec->DecodeForLearning(d, 3, *schema, "ncll", &buf, &new_class).ok()) << c.field;
    c.set(&d, bad);
    Status st = dec->DecodeForLearning(d, 3, *schema, "ncll", &buf, &new_class);
    ASSERT_TRUE(st.IsInvalidDocument()) << c.field << ": " << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(c.field));
    EXPECT_THAT(st.message(), HasSubstr("expected UTF-8, found an invalid byte 0xfe"));
    EXPECT_THAT(st.message(), HasSubstr("document #3"));
    EXPECT_THAT(st.message(), Not(HasSubstr("\xfe"))) << c.field;
    // Predictions take the same rule.
    EXPECT_TRUE(dec->Decode(d, 3, *schema, kGrowNothing, &buf, nullptr, nullptr).IsInvalidDocument()) << c.field;
  }
}

}  // namespace
}  // namespace tributary
