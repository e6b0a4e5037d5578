// Reading and writing document streams: varint-length-delimited protobuf
// frames, a StreamHeader first, then Documents (see proto/tributary.proto).
#ifndef TRIBUTARY_STREAM_IO_H_
#define TRIBUTARY_STREAM_IO_H_

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>
#include <memory>
#include <string>

#include "tributary/env.h"
#include "tributary/status.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

constexpr uint32_t kDefaultMaxFrameBytes = 64u << 20;  // 64 MiB
constexpr char kStreamMagic[] = "tributary.stream";

// Reads one stream. Not thread-safe.
class DocumentReader {
 public:
  // Opens `path` ("-" for standard input) through `env` (nullptr:
  // Env::Default()) and reads the header frame. Errors name the file:
  // NotFound, Corruption (not a stream, bad header), IOError.
  static Result<std::unique_ptr<DocumentReader>> Open(const std::string& path,
                                                      uint32_t max_frame_bytes = kDefaultMaxFrameBytes,
                                                      Env* env = nullptr);
  ~DocumentReader();

  const v1::StreamHeader& header() const { return header_; }
  const std::string& path() const { return path_; }

  // Reads the next document. At a clean end of stream returns OK with
  // *eof = true. Errors (kCorruption) name the file, the document index and
  // byte offset: truncated frame, frame length over the limit, bytes that do
  // not parse as a Document. After an error the stream cannot continue
  // (framing is lost), except after a parse error, where the frame length was
  // intact and Next() may be called again to skip to the next frame.
  Status Next(v1::Document* doc, bool* eof);

  // True when the last error of Next() left the framing intact (the frame
  // did not parse as a Document), so reading may go on with the next frame.
  bool last_error_recoverable() const { return recoverable_; }

  // Documents returned so far (also the index of the next one).
  uint64_t documents_read() const { return docs_; }
  uint64_t bytes_read() const;

  // Counts the remaining documents without parsing them (for n when the
  // header has no document_count). Requires a seekable file; rewinds after.
  static Result<uint64_t> CountDocuments(const std::string& path, uint32_t max_frame_bytes = kDefaultMaxFrameBytes,
                                         Env* env = nullptr);

 private:
  class Source;
  DocumentReader();
  // Reads one frame's bytes into buf_. kCorruption on damage.
  Status ReadFrame(bool* eof, uint32_t* size);

  std::string path_;
  uint32_t max_frame_ = 0;
  std::unique_ptr<Source> source_;
  std::unique_ptr<google::protobuf::io::CopyingInputStreamAdaptor> input_;
  v1::StreamHeader header_;
  uint64_t docs_ = 0;
  bool recoverable_ = false;
  std::string buf_;
};

// Writes one stream ("-": standard output) through `env` (nullptr:
// Env::Default()). Close() must be called to flush; errors name the file.
class DocumentWriter {
 public:
  static Result<std::unique_ptr<DocumentWriter>> Create(const std::string& path, const v1::StreamHeader& header,
                                                        Env* env = nullptr);
  ~DocumentWriter();
  Status Write(const google::protobuf::Message& msg);
  Status Close();
  // A writer of arbitrary delimited messages (no StreamHeader written).
  static Result<std::unique_ptr<DocumentWriter>> CreateRaw(const std::string& path, Env* env = nullptr);

 private:
  class Sink;
  DocumentWriter();
  std::string path_;
  std::unique_ptr<Sink> sink_;
  std::unique_ptr<google::protobuf::io::CopyingOutputStreamAdaptor> output_;
};

// A header with the magic and version filled in.
v1::StreamHeader NewStreamHeader();

}  // namespace tributary

#endif  // TRIBUTARY_STREAM_IO_H_
