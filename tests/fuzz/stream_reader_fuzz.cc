// Fuzz target: DocumentReader (streams/include/tributary/stream_io.h) over
// arbitrary bytes, read to the end the way `tributary train --skip-bad` does:
// a recoverable error (a frame that is not a Document, a second header) is
// skipped and reading goes on; any other error ends the stream.
//
// Input: byte 0 picks the reader's limits, the rest is the stream file.
//   bit 0      max_frame_bytes: 0 = the default (64 MiB), 1 = 64 bytes
//   bits 1..3  the largest chunk one read of the file returns: 2^(2k) bytes
//              (1, 4, ... 16384), so frames straddle the reader's buffers
//
// Checks: no crash or sanitizer report; the header read is protobuf's parse
// of the first frame (the reader reads its vocabulary itself);
// documents_read() counts the frames
// read; bytes_read() never passes the file's size; a stream read to a clean
// end is counted the same by CountDocuments.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "mem_env.h"
#include "tributary/stream_io.h"

namespace {

constexpr char kPath[] = "/fuzz/stream.bin";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tributary::fuzz::QuietProtobuf();
  using tributary::DocumentReader;
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const uint32_t max_frame = (mode & 1) ? 64 : tributary::kDefaultMaxFrameBytes;
  tributary::fuzz::MemEnv env;
  env.set_max_read(size_t{1} << (2 * ((mode >> 1) & 7)));
  env.files()[kPath] = std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  const uint64_t file_size = size - 1;

  auto reader = DocumentReader::Open(kPath, max_frame, &env);
  FUZZ_NOTE("open: " + (reader.ok() ? "ok" : reader.status().ToString()));
  if (!reader.ok()) return 0;
  DocumentReader& r = **reader;
  FUZZ_CHECK(r.bytes_read() <= file_size, "header read past the end of the file");
  {
    // The reader takes the vocabulary out of the header frame itself: what
    // it answers is protobuf's parse of that frame (the bytes after the
    // first length varint).
    const uint8_t* p = data + 1;
    const uint8_t* end = data + size;
    uint64_t len = 0;
    int shift = 0;
    while (p < end && shift < 64) {
      len |= static_cast<uint64_t>(*p & 0x7f) << shift;
      shift += 7;
      if (*p++ < 0x80) break;
    }
    tributary::v1::StreamHeader want;
    FUZZ_CHECK(len <= static_cast<uint64_t>(end - p) && want.ParseFromArray(p, static_cast<int>(len)),
               "the reader opened a stream whose header protobuf does not parse");
    FUZZ_CHECK(r.vocabulary().size() == static_cast<size_t>(want.schema().vocabulary_size()),
               "vocabulary of " + std::to_string(r.vocabulary().size()) + " terms, protobuf parses " +
                   std::to_string(want.schema().vocabulary_size()));
    FUZZ_CHECK(r.header().SerializeAsString() == want.SerializeAsString(), "header() differs from protobuf's parse");
  }
  tributary::v1::Document doc;
  uint64_t frames = 0;
  bool clean_end = false;
  for (;;) {
    bool eof = false;
    const uint64_t before = r.bytes_read();
    tributary::Status st = r.Next(&doc, &eof);
    FUZZ_NOTE("next: " + (st.ok() ? (eof ? "end" : "document '" + doc.id() + "'") : st.ToString()));
    FUZZ_CHECK(r.bytes_read() <= file_size, "read past the end of the file");
    if (st.ok() && eof) {
      clean_end = true;
      break;
    }
    if (st.ok() || r.last_error_recoverable()) {
      ++frames;
      // A frame (even an empty one) is at least its length byte.
      FUZZ_CHECK(r.bytes_read() > before, "a frame read no byte");
      FUZZ_CHECK(r.documents_read() == frames,
                 "documents_read() " + std::to_string(r.documents_read()) + ", frames read " + std::to_string(frames));
      if (!st.ok()) FUZZ_CHECK(!st.message().empty(), "an error without a message");
      continue;
    }
    FUZZ_CHECK(!st.message().empty(), "an error without a message");
    break;  // framing lost: the stream cannot go on
  }
  if (clean_end) {
    FUZZ_CHECK(r.bytes_read() == file_size,
               "clean end after " + std::to_string(r.bytes_read()) + " of " + std::to_string(file_size) + " bytes");
    auto n = DocumentReader::CountDocuments(kPath, max_frame, &env);
    FUZZ_CHECK(n.ok(), "CountDocuments failed on a stream read to its end: " + n.status().ToString());
    FUZZ_CHECK(*n == frames, "CountDocuments " + std::to_string(*n) + ", frames read " + std::to_string(frames));
  }
  return 0;
}
