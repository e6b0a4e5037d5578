// Reading and writing document streams: varint-length-delimited protobuf
// frames, a StreamHeader first, then Documents (see proto/tributary.proto).
//
// Integrity (issue 13). A stream whose header sets frame_checksum
// (format_version 2) carries a masked CRC-32 on the header and on every
// document frame (layout: the StreamHeader message in tributary.proto), so a
// damaged archive is refused rather than learned. Without it (format_version
// 1, the original format) a flipped bit inside a document usually still
// parses -- as a different term id, count or label -- and is learned.
#ifndef TRIBUTARY_STREAM_IO_H_
#define TRIBUTARY_STREAM_IO_H_

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tributary/env.h"
#include "tributary/schema.h"
#include "tributary/status.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

constexpr uint32_t kDefaultMaxFrameBytes = 64u << 20;  ///< 64 MiB
constexpr char kStreamMagic[] = "tributary.stream";    ///< StreamHeader.magic of every stream
/// format_version of streams without / with per-frame checksums. Checksums
/// take a new version, not only a new header field, because readers of
/// version 1 check the version (and refuse anything else with a clear
/// message) but would ignore an unknown field and read each frame's CRC as the
/// first bytes of a Document.
constexpr uint32_t kStreamFormatVersion = 1;
constexpr uint32_t kStreamFormatVersionChecksummed = 2;  ///< format_version with per-frame checksums

/// Reads one stream. Not thread-safe.
class DocumentReader {
 public:
  /// Opens `path` ("-" for standard input) through `env` (nullptr:
  /// Env::Default()) and reads the header frame. Errors name the file:
  /// NotFound, Corruption (not a stream, bad header, header checksum
  /// mismatch, unsupported format_version or frame_checksum), IOError.
  static Result<std::unique_ptr<DocumentReader>> Open(const std::string& path,
                                                      uint32_t max_frame_bytes = kDefaultMaxFrameBytes,
                                                      Env* env = nullptr);
  ~DocumentReader();

  /// The stream's header, as read by Open. Open keeps the vocabulary apart
  /// (vocabulary()): the first call copies it into this message, so callers
  /// that need the other fields only use fields(), and a model's schema
  /// comes from schema().
  const v1::StreamHeader& header() const;
  /// The header without its vocabulary (schema().vocabulary() is empty):
  /// magic, versions, the schema's classes and features, document_count,
  /// source.
  const v1::StreamHeader& fields() const { return fields_; }
  /// The header's vocabulary, term by term in id order.
  const std::vector<std::string>& vocabulary() const;
  /// The header's schema as a ModelSchema (ModelSchema::FromProto's checks
  /// and errors), made on the first call: copies share its vocabulary (a
  /// model made from it, and DocumentDecoder::Create given vocabulary(),
  /// copy no term).
  Result<ModelSchema> schema() const;
  const std::string& path() const { return path_; }  ///< as given to Open ("-": standard input)
  /// True when every frame carries a CRC that Next() verifies.
  bool frame_checksum() const { return checksummed_; }

  /// Reads the next document. At a clean end of stream returns OK with
  /// *eof = true. Errors (kCorruption) name the file, the document index and
  /// byte offset: truncated frame, frame length over the limit, a checksum
  /// mismatch (checksummed streams: stored vs computed CRC named), bytes that
  /// do not parse as a Document. After an error the stream cannot continue
  /// (framing is lost), except after a checksum mismatch or a parse error,
  /// where Next() may be called again to go on with the next frame. (After a
  /// checksum mismatch the damage may have been to the length itself; the
  /// frames read after it then fail their checksums too, so nothing damaged
  /// is ever returned.)
  Status Next(v1::Document* doc, bool* eof);

  /// Passes over the next document's frame without checking or parsing it
  /// (a document another reader of the same stream handles: MPI ranks).
  /// Errors: damage that loses the framing, as Next().
  Status Skip(bool* eof);

  /// True when the last error of Next() left the framing intact (the frame
  /// did not parse as a Document), so reading may go on with the next frame.
  bool last_error_recoverable() const { return recoverable_; }

  /// Documents returned so far (also the index of the next one).
  uint64_t documents_read() const { return docs_; }
  /// Bytes of the stream consumed so far, header included: the byte offset
  /// of the next frame.
  uint64_t bytes_read() const;

  /// Counts the remaining documents without parsing them or checking their
  /// checksums (for n when the header has no document_count). Requires a
  /// seekable file; rewinds after.
  static Result<uint64_t> CountDocuments(const std::string& path, uint32_t max_frame_bytes = kDefaultMaxFrameBytes,
                                         Env* env = nullptr);

 private:
  class Source;
  DocumentReader();
  /// Reads one frame (and, in a checksummed stream past the header, its
  /// stored CRC into frame_crc_); frame_ views its bytes. kCorruption on
  /// damage. With `in_place`, frame_ points into the input's buffer when the
  /// frame lies whole in it (no copy), valid until the input is read again:
  /// the caller must be done with it before the next read. Otherwise (or
  /// when the frame straddles two buffers) the bytes are copied to buf_.
  Status ReadFrame(bool* eof, uint32_t* size, bool in_place = false);

  std::string path_;
  uint32_t max_frame_ = 0;
  std::unique_ptr<Source> source_;
  std::unique_ptr<google::protobuf::io::CopyingInputStreamAdaptor> input_;
  /// Reads the header frame's bytes into fields_ and terms_ (the
  /// vocabulary's strings straight from the wire, not through a message's
  /// string objects); false when they do not parse as a StreamHeader.
  bool ParseHeader(std::string_view frame);
  v1::StreamHeader fields_;
  mutable std::vector<std::string> terms_;               ///< the vocabulary until schema() takes it
  mutable std::unique_ptr<v1::StreamHeader> full_;       ///< header(), made on demand
  mutable std::unique_ptr<Result<ModelSchema>> schema_;  ///< schema(), made on demand
  uint64_t docs_ = 0;
  bool recoverable_ = false;
  bool checksummed_ = false;
  uint32_t frame_crc_ = 0;  ///< masked, as stored
  std::string buf_;
  std::string_view frame_;  ///< the last frame's bytes (see ReadFrame)
};

/// Writes one stream ("-": standard output) through `env` (nullptr:
/// Env::Default()). Close() must be called to flush; errors name the file.
class DocumentWriter {
 public:
  /// Writes `header` and returns a writer for its documents. The header's
  /// frame_checksum chooses the framing, and the writer sets format_version
  /// to match (1 without checksums, 2 with), whatever `header` says.
  /// InvalidArgument for a frame_checksum this version does not know.
  static Result<std::unique_ptr<DocumentWriter>> Create(const std::string& path, const v1::StreamHeader& header,
                                                        Env* env = nullptr);
  ~DocumentWriter();
  /// Appends `msg` as one frame (a Document, after Create); buffered until
  /// Flush or Close. Errors: IOError (a failed write); Internal after Close.
  Status Write(const google::protobuf::MessageLite& msg);
  /// Hands everything written so far to the file (a reader at the other end
  /// of a pipe sees it); no fsync.
  Status Flush();
  /// Flushes and closes the file; nothing more can be written. Errors: the
  /// first write or close error, naming the file. Calling it again returns OK.
  Status Close();
  /// A writer of arbitrary delimited messages (no StreamHeader written).
  static Result<std::unique_ptr<DocumentWriter>> CreateRaw(const std::string& path, Env* env = nullptr);

 private:
  class Sink;
  DocumentWriter();
  /// Writes a frame: varint length, then (checksummed) its masked CRC, then
  /// the bytes.
  Status WriteFrame(const std::string& bytes);
  std::string path_;
  std::unique_ptr<Sink> sink_;
  std::unique_ptr<google::protobuf::io::CopyingOutputStreamAdaptor> output_;
  bool checksummed_ = false;
  std::string frame_;  ///< reused serialization buffer
};

/// A header with the magic and version filled in; with `frame_checksum`,
/// frame_checksum = CRC32 and format_version 2.
v1::StreamHeader NewStreamHeader(bool frame_checksum = false);

}  // namespace tributary

#endif  // TRIBUTARY_STREAM_IO_H_
