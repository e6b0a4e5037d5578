// Per-frame checksums of document streams (issue 13): a checksummed stream
// (format_version 2) round-trips; one flipped bit anywhere in it is refused,
// naming the file, the document and its byte offset with the stored and
// computed CRCs, and reading goes on with the next frame (--skip-bad), never
// returning a damaged document. The same flip in a plain stream is learned as
// a different document -- the reason for the option. Plain streams still
// read, and a version 1 reader is kept out by the format_version.
#include <gmock/gmock.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "test_util.h"
#include "tributary/checksum.h"
#include "tributary/convert.h"
#include "tributary/stream_io.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// protobuf's delimited framing, written independently of the library's
// writer: a varint length, then the message. False if `out` failed.
bool SerializeDelimited(const google::protobuf::MessageLite& m, std::ostream* out) {
  const std::string bytes = m.SerializeAsString();
  uint8_t len[10];
  const uint8_t* end =
      google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(static_cast<uint64_t>(bytes.size()), len);
  out->write(reinterpret_cast<const char*>(len), end - len);
  out->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(*out);
}

std::string ReadAll(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
// Replaces the file with a new one: rewriting it in place (truncate to 0,
// write) makes ext4 flush it on close (auto_da_alloc), thousands of times.
void WriteAll(const std::string& p, const std::string& data) {
  std::filesystem::remove(p);
  std::ofstream(p, std::ios::binary) << data;
}

constexpr int kDocs = 12;

v1::Document Doc(int i) {
  v1::Document d;
  d.set_id("doc-" + std::to_string(i));
  d.set_label(i % 2 ? "sports" : "tech");
  for (uint32_t k = 0; k < 4; ++k) {
    d.add_term_ids(static_cast<uint32_t>(i * 7 + static_cast<int>(k)) % 50);
    d.add_term_counts(1.0 + k);
  }
  if (i == 5) {  // a frame over 127 bytes: a two-byte length varint
    for (int k = 0; k < 20; ++k) d.add_tokens("token" + std::to_string(k));
  }
  return d;
}

v1::StreamHeader Header(bool checksum) {
  v1::StreamHeader h = NewStreamHeader(checksum);
  *h.mutable_schema() = testing::TextSchema(50, 2);
  h.set_document_count(kDocs);
  return h;
}

// Where the frames of a stream lie.
struct Frame {
  size_t off = 0, hdr = 0, crc = 0, len = 0;  // crc: 4 or 0
  size_t payload() const { return off + hdr + crc; }
  size_t end() const { return payload() + len; }
};

class StreamChecksumTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TempDir("stream_checksum"); }

  std::string Write(const std::string& name, bool checksum) {
    const std::string path = dir_ + "/" + name;
    auto w = DocumentWriter::Create(path, Header(checksum));
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (int i = 0; i < kDocs; ++i) EXPECT_TRUE((*w)->Write(Doc(i)).ok());
    EXPECT_TRUE((*w)->Close().ok());
    return path;
  }
  // The document frames of `data` (header skipped; plain or checksummed).
  static std::vector<Frame> Frames(const std::string& data, bool checksum, size_t* header_end) {
    std::vector<Frame> out;
    size_t off = 0;
    bool header = true;
    while (off < data.size()) {
      Frame f;
      f.off = off;
      size_t len = 0;
      int shift = 0;
      for (;;) {
        const auto b = static_cast<unsigned char>(data.at(off + f.hdr++));
        len |= static_cast<size_t>(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
      }
      f.len = len;
      if (header) {
        *header_end = off + f.hdr + len + (checksum ? 4 : 0);
        off = *header_end;
        header = false;
        continue;
      }
      f.crc = checksum ? 4 : 0;
      out.push_back(f);
      off = f.end();
    }
    EXPECT_EQ(off, data.size());
    return out;
  }

  // Reads `path` to the end as --skip-bad does: recoverable errors are
  // collected and reading goes on.
  struct ReadResult {
    Status open;
    std::vector<v1::Document> docs;
    std::vector<Status> errors;  // recoverable ones, then a final one if any
    bool stopped = false;        // an unrecoverable error ended the read
  };
  static ReadResult ReadSkippingBad(const std::string& path) {
    ReadResult res;
    auto r = DocumentReader::Open(path);
    if (!r.ok()) {
      res.open = r.status();
      return res;
    }
    for (;;) {
      v1::Document d;
      bool eof = false;
      Status st = (*r)->Next(&d, &eof);
      if (!st.ok()) {
        res.errors.push_back(st);
        if ((*r)->last_error_recoverable()) continue;
        res.stopped = true;
        return res;
      }
      if (eof) return res;
      res.docs.push_back(d);
    }
  }
  static bool IsOriginal(const v1::Document& d) {
    for (int i = 0; i < kDocs; ++i) {
      if (d.SerializeAsString() == Doc(i).SerializeAsString()) return true;
    }
    return false;
  }

  std::string dir_;
};

TEST_F(StreamChecksumTest, RoundTrip) {
  const std::string plain = Write("plain.tds", false);
  const std::string checked = Write("checked.tds", true);
  // 4 bytes more per frame, the header's included, and 2 for the header's
  // frame_checksum field.
  EXPECT_EQ(ReadAll(checked).size(), ReadAll(plain).size() + 4 * (kDocs + 1) + 2);
  auto r = DocumentReader::Open(checked);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->frame_checksum());
  EXPECT_EQ((*r)->header().format_version(), kStreamFormatVersionChecksummed);
  EXPECT_EQ((*r)->header().schema().SerializeAsString(), testing::TextSchema(50, 2).SerializeAsString());
  for (int i = 0; i < kDocs; ++i) {
    v1::Document d;
    bool eof = true;
    ASSERT_TRUE((*r)->Next(&d, &eof).ok());
    ASSERT_FALSE(eof);
    EXPECT_EQ(d.SerializeAsString(), Doc(i).SerializeAsString());
  }
  v1::Document d;
  bool eof = false;
  ASSERT_TRUE((*r)->Next(&d, &eof).ok());
  EXPECT_TRUE(eof);
  EXPECT_EQ((*r)->bytes_read(), ReadAll(checked).size());
  auto n = DocumentReader::CountDocuments(checked);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, static_cast<uint64_t>(kDocs));
}

// The writer owns the framing: format_version follows frame_checksum.
TEST_F(StreamChecksumTest, WriterSetsTheVersionFromTheChecksumOption) {
  for (bool checksum : {false, true}) {
    v1::StreamHeader h = Header(checksum);
    h.set_format_version(checksum ? 1 : 2);  // wrong on purpose
    const std::string p = dir_ + "/v.tds";
    auto w = DocumentWriter::Create(p, h);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(Doc(0)).ok());
    ASSERT_TRUE((*w)->Close().ok());
    auto r = DocumentReader::Open(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->frame_checksum(), checksum);
    EXPECT_EQ((*r)->header().format_version(), checksum ? 2u : 1u);
  }
  v1::StreamHeader h = Header(false);
  h.set_frame_checksum(static_cast<v1::StreamHeader::FrameChecksum>(7));
  auto w = DocumentWriter::Create(dir_ + "/bad.tds", h);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("frame_checksum 7 is not supported"));
}

// The first frame of a checksummed stream is a plain delimited StreamHeader
// saying format_version 2: what a version 1 reader checks and refuses
// ("stream format_version 2 is not supported (expected 1)") instead of
// reading each frame's CRC as the start of a Document.
TEST_F(StreamChecksumTest, AVersionOneReaderSeesVersionTwo) {
  const std::string data = ReadAll(Write("checked.tds", true));
  // (protobuf's delimited framing: a varint length, then the message)
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(data.data()),
                                            static_cast<int>(data.size()));
  uint32_t size = 0;
  ASSERT_TRUE(in.ReadVarint32(&size));
  const auto limit = in.PushLimit(static_cast<int>(size));
  v1::StreamHeader h;
  ASSERT_TRUE(h.ParseFromCodedStream(&in));
  in.PopLimit(limit);
  EXPECT_EQ(h.magic(), kStreamMagic);
  EXPECT_EQ(h.format_version(), 2u);
  EXPECT_EQ(h.frame_checksum(), v1::StreamHeader::FRAME_CHECKSUM_CRC32);
}

// Every bit of every document frame: a flip in the CRC or the payload of
// document #i is refused as exactly that document, and reading goes on with
// every other document intact. A flip in the length loses the framing: #i is
// refused all the same, what follows is refused or ends the read, and no
// document that is not one of the originals is ever returned.
TEST_F(StreamChecksumTest, EveryFlippedBitInADocumentFrameIsRefused) {
  const std::string path = Write("checked.tds", true);
  const std::string data = ReadAll(path);
  size_t header_end = 0;
  const auto frames = Frames(data, true, &header_end);
  ASSERT_EQ(frames.size(), static_cast<size_t>(kDocs));
  ASSERT_EQ(frames[5].hdr, 2u);
  const std::string bad = dir_ + "/flipped.tds";
  google::protobuf::LogSilencer quiet;
  int cases = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    for (size_t byte = f.off; byte < f.end(); ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        SCOPED_TRACE("document #" + std::to_string(i) + " byte " + std::to_string(byte) + " bit " +
                     std::to_string(bit));
        std::string flipped = data;
        flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
        WriteAll(bad, flipped);
        ReadResult res = ReadSkippingBad(bad);
        ++cases;
        ASSERT_TRUE(res.open.ok()) << res.open.ToString();
        ASSERT_FALSE(res.errors.empty());
        for (const auto& d : res.docs) EXPECT_TRUE(IsOriginal(d)) << "document '" << d.id() << "'";
        for (size_t k = 0; k < i; ++k) {
          ASSERT_GT(res.docs.size(), k);
          EXPECT_EQ(res.docs[k].id(), Doc(static_cast<int>(k)).id());
        }
        const Status& first = res.errors[0];
        EXPECT_TRUE(first.IsCorruption()) << first.ToString();
        EXPECT_THAT(first.message(), HasSubstr("'" + bad + "'"));
        if (byte >= f.off + f.hdr) {  // CRC or payload: framing intact
          EXPECT_THAT(first.message(),
                      HasSubstr("document #" + std::to_string(i) + " (frame at byte " + std::to_string(f.off) + ", " +
                                std::to_string(f.len) + " bytes): checksum mismatch (stored 0x"));
          EXPECT_THAT(first.message(), MatchesRegex(".*stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}.*"));
          EXPECT_EQ(res.errors.size(), 1u);
          EXPECT_FALSE(res.stopped);
          EXPECT_EQ(res.docs.size(), static_cast<size_t>(kDocs - 1));
        } else {
          EXPECT_THAT(first.message(), HasSubstr("at byte " + std::to_string(f.off)));
        }
      }
    }
  }
  std::cerr << cases << " flipped bits in document frames, all refused\n";
}

// Every bit of the header frame and of its CRC: Open refuses the stream.
// (Every bit of the frame's first 24 and last 12 bytes: the length, magic,
// format_version, frame_checksum and CRC; one bit of each byte of the schema
// between them.) In particular no flip turns it into a valid unchecked
// version 1 header (see FRAME_CHECKSUM_CRC32 in tributary.proto).
TEST_F(StreamChecksumTest, EveryFlippedBitInTheHeaderIsRefused) {
  const std::string data = ReadAll(Write("checked.tds", true));
  size_t header_end = 0;
  Frames(data, true, &header_end);
  const std::string bad = dir_ + "/flipped.tds";
  google::protobuf::LogSilencer quiet;  // "invalid UTF-8" from the flipped schema strings
  for (size_t byte = 0; byte < header_end; ++byte) {
    const bool all = byte < 24 || byte + 12 >= header_end;
    for (int bit = all ? 0 : static_cast<int>(byte % 8); bit < (all ? 8 : static_cast<int>(byte % 8) + 1); ++bit) {
      std::string flipped = data;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      WriteAll(bad, flipped);
      auto r = DocumentReader::Open(bad);
      ASSERT_FALSE(r.ok()) << "byte " << byte << " bit " << bit;
      EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
      EXPECT_THAT(r.status().message(), HasSubstr("'" + bad + "'"));
    }
  }
  // A damaged schema that still parses is caught by the header's CRC.
  std::string renamed = data;
  const size_t at = renamed.find("t17");
  ASSERT_NE(at, std::string::npos);
  ASSERT_LT(at, header_end);
  renamed[at + 1] = '2';  // term t17 becomes t27
  WriteAll(bad, renamed);
  auto r = DocumentReader::Open(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("stream header checksum mismatch"));
}

// Why the option exists: the same flip in a plain stream is read as another
// document (here, another label), which training would learn.
TEST_F(StreamChecksumTest, TheSameFlipInAPlainStreamIsReadAsAnotherDocument) {
  for (bool checksum : {false, true}) {
    SCOPED_TRACE(checksum ? "checksummed" : "plain");
    const std::string data = ReadAll(Write("s.tds", checksum));
    size_t header_end = 0;
    const auto frames = Frames(data, checksum, &header_end);
    const size_t label = data.find("sports", frames[3].payload());  // document 3's label
    ASSERT_LT(label, frames[3].end());
    std::string flipped = data;
    flipped[label + 1] = static_cast<char>(flipped[label + 1] ^ 0x01);  // "sports" -> "sqorts"
    const std::string bad = dir_ + "/flipped.tds";
    WriteAll(bad, flipped);
    ReadResult res = ReadSkippingBad(bad);
    ASSERT_TRUE(res.open.ok());
    if (!checksum) {
      EXPECT_TRUE(res.errors.empty());
      ASSERT_EQ(res.docs.size(), static_cast<size_t>(kDocs));
      EXPECT_EQ(res.docs[3].label(), "sqorts");  // accepted, silently different
    } else {
      ASSERT_EQ(res.errors.size(), 1u);
      EXPECT_THAT(res.errors[0].message(), HasSubstr("document #3"));
      EXPECT_THAT(res.errors[0].message(), HasSubstr("checksum mismatch"));
      EXPECT_EQ(res.docs.size(), static_cast<size_t>(kDocs - 1));
    }
  }
}

// Zeroed blocks (a crash after the file grew, before its data landed) are not
// valid frames: a zero length byte and a zero CRC do not match.
TEST_F(StreamChecksumTest, ZeroedTailIsRefused) {
  const std::string path = Write("checked.tds", true);
  WriteAll(path, ReadAll(path) + std::string(10, '\0'));
  ReadResult res = ReadSkippingBad(path);
  ASSERT_TRUE(res.open.ok());
  EXPECT_EQ(res.docs.size(), static_cast<size_t>(kDocs));
  ASSERT_EQ(res.errors.size(), 2u);  // two 5-byte "frames" of zeros
  EXPECT_THAT(res.errors[0].message(), HasSubstr("document #" + std::to_string(kDocs) + " (frame at byte "));
  EXPECT_THAT(res.errors[0].message(), HasSubstr("0 bytes): checksum mismatch (stored 0x00000000, computed 0x"));
}

TEST_F(StreamChecksumTest, TruncationInsideAChecksumIsReported) {
  const std::string path = Write("checked.tds", true);
  const std::string data = ReadAll(path);
  size_t header_end = 0;
  const auto frames = Frames(data, true, &header_end);
  WriteAll(path, data.substr(0, frames[4].off + frames[4].hdr + 2));  // inside document 4's CRC
  ReadResult res = ReadSkippingBad(path);
  ASSERT_TRUE(res.open.ok());
  EXPECT_EQ(res.docs.size(), 4u);
  ASSERT_EQ(res.errors.size(), 1u);
  EXPECT_TRUE(res.stopped);
  EXPECT_THAT(res.errors[0].message(), HasSubstr("ended inside the frame's checksum"));
  WriteAll(path, data.substr(0, header_end - 1));  // inside the header's CRC
  auto r = DocumentReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("truncated stream header"));
}

// Streams of format_version 1, as written before this option and by any
// protobuf runtime, read as before.
TEST_F(StreamChecksumTest, PlainStreamsStillRead) {
  const std::string path = dir_ + "/old.tds";
  {
    std::ofstream out(path, std::ios::binary);
    v1::StreamHeader h;
    h.set_magic(kStreamMagic);
    h.set_format_version(1);
    *h.mutable_schema() = testing::TextSchema(50, 2);
    ASSERT_TRUE(SerializeDelimited(h, &out));
    for (int i = 0; i < kDocs; ++i) ASSERT_TRUE(SerializeDelimited(Doc(i), &out));
  }
  ReadResult res = ReadSkippingBad(path);
  ASSERT_TRUE(res.open.ok()) << res.open.ToString();
  EXPECT_TRUE(res.errors.empty());
  ASSERT_EQ(res.docs.size(), static_cast<size_t>(kDocs));
  for (int i = 0; i < kDocs; ++i) EXPECT_EQ(res.docs[i].SerializeAsString(), Doc(i).SerializeAsString());
  auto r = DocumentReader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*r)->frame_checksum());
}

// Headers whose version and checksum disagree, or name what this reader does
// not know, are refused with what was found.
TEST_F(StreamChecksumTest, InconsistentOrUnknownHeadersAreRefused) {
  struct Case {
    uint32_t version;
    int checksum;
    const char* message;
  };
  for (const Case& c :
       {Case{1, 2, "format_version 1 with frame checksums"}, Case{2, 0, "format_version 2 without frame checksums"},
        Case{3, 2, "format_version 3 is not supported"}, Case{2, 1, "frame_checksum 1 is not supported"},
        Case{2, 9, "frame_checksum 9 is not supported"}}) {
    const std::string path = dir_ + "/h.tds";
    {
      std::ofstream out(path, std::ios::binary);
      v1::StreamHeader h;
      h.set_magic(kStreamMagic);
      h.set_format_version(c.version);
      h.set_frame_checksum(static_cast<v1::StreamHeader::FrameChecksum>(c.checksum));
      ASSERT_TRUE(SerializeDelimited(h, &out));
    }
    auto r = DocumentReader::Open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption());
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

TEST_F(StreamChecksumTest, ConvertWritesChecksummedStreamsByDefault) {
  EXPECT_TRUE(ConvertOptions().frame_checksum);
  const std::string tsv = dir_ + "/in.tsv";
  WriteAll(tsv,
           "sports\tthe match was won\ntech\tthe kernel "
           "compiles\nsports\ta late goal\n");
  for (bool checksum : {false, true}) {
    ConvertOptions o;
    o.format = "tsv";
    o.in = tsv;
    o.out = dir_ + (checksum ? "/c.tds" : "/p.tds");
    o.frame_checksum = checksum;
    ConvertReport rep;
    ASSERT_TRUE(ConvertFile(o, &rep).ok());
    auto r = DocumentReader::Open(o.out);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)->frame_checksum(), checksum);
  }
  ReadResult p = ReadSkippingBad(dir_ + "/p.tds");
  ReadResult c = ReadSkippingBad(dir_ + "/c.tds");
  ASSERT_EQ(p.docs.size(), 3u);
  ASSERT_EQ(c.docs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(p.docs[i].SerializeAsString(), c.docs[i].SerializeAsString());
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

// The CRC every frame, log record and snapshot carries (ISA-L's
// crc32_gzip_refl since 2026-11-27, zlib's crc32 before, boost::crc_32_type
// first): it must stay that CRC, or old files become unreadable. Checked
// against the standard check value and a bit-at-a-time reference
// (reflected 0xEDB88320, init and final xor 0xFFFFFFFF) over lengths around
// the vector widths, with chaining.
uint32_t ReferenceCrc32(const unsigned char* p, size_t n, uint32_t crc) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Crc32Test, IsTheGzipCrcForEveryLengthAndChains) {
  const char* check = "123456789";
  EXPECT_EQ(Crc32(check, 9), 0xCBF43926u);
  std::mt19937_64 rng(3);
  std::vector<unsigned char> buf(70000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  for (size_t n :
       {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 4096, 65536, 70000}) {
    for (size_t off : {0, 1, 3}) {
      if (off + n > buf.size()) continue;
      EXPECT_EQ(Crc32(buf.data() + off, n), ReferenceCrc32(buf.data() + off, n, 0)) << n << " at " << off;
    }
    const size_t half = n / 2;
    EXPECT_EQ(Crc32(buf.data() + half, n - half, Crc32(buf.data(), half)), Crc32(buf.data(), n)) << n;
  }
}

}  // namespace
}  // namespace tributary
