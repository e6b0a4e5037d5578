#include "tributary/stream_io.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/wire_format_lite.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "tributary/checksum.h"

namespace tributary {

namespace pbio = google::protobuf::io;

namespace {

// The masked CRC of a frame: its length varint, then its bytes. The length
// is covered too, so a damaged length that still frames a CRC-valid run of
// bytes is caught.
uint32_t FrameCrc(std::string_view bytes) {
  uint8_t len[10];
  const uint8_t* end = pbio::CodedOutputStream::WriteVarint64ToArray(bytes.size(), len);
  const uint32_t crc = Crc32(len, static_cast<size_t>(end - len));
  return MaskCrc32(Crc32(bytes.data(), bytes.size(), crc));
}

std::string Hex(uint32_t v) {
  char s[16];
  std::snprintf(s, sizeof(s), "0x%08x", v);
  return s;
}

}  // namespace

v1::StreamHeader NewStreamHeader(bool frame_checksum) {
  v1::StreamHeader h;
  h.set_magic(kStreamMagic);
  h.set_format_version(frame_checksum ? kStreamFormatVersionChecksummed : kStreamFormatVersion);
  if (frame_checksum) h.set_frame_checksum(v1::StreamHeader::FRAME_CHECKSUM_CRC32);
  return h;
}

// Protobuf's copying adaptors over an Env file. The adaptors report only
// "failed"; the Status that says why is kept here.
class DocumentReader::Source : public pbio::CopyingInputStream {
 public:
  explicit Source(std::unique_ptr<SequentialFile> file) : file_(std::move(file)) {}
  int Read(void* buffer, int size) override {
    size_t got = 0;
    Status st = file_->Read(static_cast<size_t>(size), static_cast<char*>(buffer), &got);
    if (!st.ok()) {
      error_ = std::move(st);
      return -1;
    }
    return static_cast<int>(got);
  }
  const Status& error() const { return error_; }

 private:
  std::unique_ptr<SequentialFile> file_;
  Status error_;
};

class DocumentWriter::Sink : public pbio::CopyingOutputStream {
 public:
  explicit Sink(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  bool Write(const void* buffer, int size) override {
    Status st = file_->Append(std::string_view(static_cast<const char*>(buffer), static_cast<size_t>(size)));
    if (!st.ok() && error_.ok()) error_ = std::move(st);
    return error_.ok();
  }
  WritableFile* file() { return file_.get(); }
  const Status& error() const { return error_; }

 private:
  std::unique_ptr<WritableFile> file_;
  Status error_;
};

DocumentReader::DocumentReader() = default;

DocumentReader::~DocumentReader() { input_.reset(); }

uint64_t DocumentReader::bytes_read() const { return input_ ? static_cast<uint64_t>(input_->ByteCount()) : 0; }

Status DocumentReader::ReadFrame(bool* eof, uint32_t* size, bool in_place) {
  *eof = false;
  const void* data;
  int avail = 0;
  // Peek for a clean end of stream.
  do {
    if (!input_->Next(&data, &avail)) {
      if (!source_->error().ok()) return source_->error().WithContext("reading stream '" + path_ + "'");
      *eof = true;
      return Status::OK();
    }
  } while (avail == 0);
  input_->BackUp(avail);
  const uint64_t offset = bytes_read();
  pbio::CodedInputStream coded(input_.get());
  // 64 bits: ReadVarint32 would drop the high bits, reading 2^32 + n as n.
  uint64_t len = 0;
  // A device error surfaces as a short read: report it as what it is.
  auto io_error = [&] { return source_->error().WithContext("reading stream '" + path_ + "'"); };
  if (!coded.ReadVarint64(&len)) {
    if (!source_->error().ok()) return io_error();
    return Status::Corruption("'" + path_ + "': truncated or invalid frame length at byte " + std::to_string(offset) +
                              " (frame " + std::to_string(docs_ + 1) + ")");
  }
  if (len > max_frame_) {
    return Status::Corruption("'" + path_ + "': frame at byte " + std::to_string(offset) + " declares " +
                              std::to_string(len) + " bytes, over the limit of " + std::to_string(max_frame_) +
                              " bytes (garbage, or raise --max-frame-bytes)");
  }
  if (checksummed_ && !coded.ReadLittleEndian32(&frame_crc_)) {
    if (!source_->error().ok()) return io_error();
    return Status::Corruption("'" + path_ + "': truncated frame at byte " + std::to_string(offset) +
                              ": the stream ended inside the frame's checksum");
  }
  // In place when the frame lies whole in the input's current buffer (a
  // frame is a few hundred bytes, the buffer 64 KiB): no copy. The bytes
  // stay where they are when `coded` returns the rest of the buffer to
  // input_, until input_ is read again.
  const void* direct = nullptr;
  int direct_size = 0;
  if (in_place && coded.GetDirectBufferPointer(&direct, &direct_size) && static_cast<uint64_t>(direct_size) >= len) {
    frame_ = std::string_view(static_cast<const char*>(direct), len);
    coded.Skip(static_cast<int>(len));
  } else {
    buf_.resize(len);
    if (len > 0 && !coded.ReadRaw(buf_.data(), static_cast<int>(len))) {
      if (!source_->error().ok()) return io_error();
      return Status::Corruption("'" + path_ + "': truncated frame at byte " + std::to_string(offset) + ": expected " +
                                std::to_string(len) + " bytes, the stream ended first");
    }
    frame_ = buf_;
  }
  *size = static_cast<uint32_t>(len);
  return Status::OK();
}

namespace {

void PutVarint(uint64_t v, std::string* out) {
  uint8_t b[10];
  const uint8_t* e = pbio::CodedOutputStream::WriteVarint64ToArray(v, b);
  out->append(reinterpret_cast<const char*>(b), static_cast<size_t>(e - b));
}

// Walks a StreamHeader's fields with protobuf's reader: other(bytes) for
// each field outside the schema, schema_other(bytes) for each field of a
// schema other than its vocabulary (and once, empty, per occurrence of the
// schema), term(bytes) for each vocabulary entry (in order, over every
// occurrence). False for damage (a cut-off or malformed field, a field
// number 0) or a callback's refusal.
template <typename Other, typename SchemaOther, typename Term>
bool WalkHeader(std::string_view frame, Other other, SchemaOther schema_other, Term term) {
  using WFL = google::protobuf::internal::WireFormatLite;
  constexpr uint32_t kSchemaTag = WFL::MakeTag(v1::StreamHeader::kSchemaFieldNumber, WFL::WIRETYPE_LENGTH_DELIMITED);
  constexpr uint32_t kTermTag = WFL::MakeTag(v1::Schema::kVocabularyFieldNumber, WFL::WIRETYPE_LENGTH_DELIMITED);
  pbio::CodedInputStream in(reinterpret_cast<const uint8_t*>(frame.data()), static_cast<int>(frame.size()));
  const auto since = [&](int from) {  // the bytes read since `from`
    return std::string_view(frame.data() + from, static_cast<size_t>(in.CurrentPosition() - from));
  };
  while (in.CurrentPosition() < static_cast<int>(frame.size())) {
    const int field = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (WFL::GetTagFieldNumber(tag) == 0) return false;  // (0: damage)
    if (tag != kSchemaTag) {
      if (!WFL::SkipField(&in, tag)) return false;
      other(since(field));
      continue;
    }
    uint32_t len = 0;
    if (!in.ReadVarint32(&len) || len > static_cast<uint32_t>(frame.size() - in.CurrentPosition())) return false;
    const auto limit = in.PushLimit(static_cast<int>(len));
    schema_other(std::string_view());
    while (in.BytesUntilLimit() > 0) {
      const int inner = in.CurrentPosition();
      const uint32_t t = in.ReadTag();
      if (WFL::GetTagFieldNumber(t) == 0) return false;
      if (t != kTermTag) {
        if (!WFL::SkipField(&in, t)) return false;
        schema_other(since(inner));
        continue;
      }
      uint32_t n = 0;
      if (!in.ReadVarint32(&n) || n > static_cast<uint32_t>(in.BytesUntilLimit())) return false;
      const char* at = frame.data() + in.CurrentPosition();
      if (!term(std::string_view(at, n)) || !in.Skip(static_cast<int>(n))) return false;
    }
    in.PopLimit(limit);
  }
  return true;
}

// The header's bytes with every schema.vocabulary entry taken out into
// *terms (in order; invalid UTF-8 refused as protobuf refuses it) and the
// schema's other fields gathered into one schema field at the end (a parser
// merges the occurrences of a message field, and the other fields keep
// their order). False for what this scan does not take (WalkHeader's, and
// invalid UTF-8): protobuf then parses the frame itself. The terms are
// counted first, so the vector is allocated once (11,554 terms: 370 KB,
// where growing it by doubling touched as much again in fresh pages).
bool StripVocabulary(std::string_view frame, std::string* rest, std::vector<std::string>* terms) {
  size_t count = 0;
  const auto skip = [](std::string_view) {};
  if (!WalkHeader(frame, skip, skip, [&](std::string_view) { return ++count, true; })) return false;
  rest->clear();
  terms->clear();
  terms->reserve(count);
  std::string schema;
  bool has_schema = false;
  const bool ok = WalkHeader(
      frame, [&](std::string_view f) { rest->append(f); },
      [&](std::string_view f) {
        has_schema = true;
        schema.append(f);
      },
      [&](std::string_view t) {
        if (!google::protobuf::internal::IsStructurallyValidUTF8(t.data(), static_cast<int>(t.size()))) return false;
        terms->emplace_back(t);
        return true;
      });
  if (!ok) return false;
  if (has_schema) {
    PutVarint((uint64_t{v1::StreamHeader::kSchemaFieldNumber} << 3) | 2u, rest);
    PutVarint(schema.size(), rest);
    rest->append(schema);
  }
  return true;
}

}  // namespace

bool DocumentReader::ParseHeader(std::string_view frame) {
  if (frame.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return false;
  std::string rest;
  if (StripVocabulary(frame, &rest, &terms_) && fields_.ParseFromString(rest)) return true;
  // What the scan leaves to protobuf: the whole message, then its terms
  // moved out.
  terms_.clear();
  if (!fields_.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) return false;
  if (!fields_.has_schema()) return true;  // (mutable_schema() would add an empty one)
  auto* vocabulary = fields_.mutable_schema()->mutable_vocabulary();
  terms_.reserve(static_cast<size_t>(vocabulary->size()));
  for (std::string& t : *vocabulary) terms_.push_back(std::move(t));
  fields_.mutable_schema()->clear_vocabulary();
  return true;
}

const v1::StreamHeader& DocumentReader::header() const {
  if (!full_) {
    full_ = std::make_unique<v1::StreamHeader>(fields_);
    const std::vector<std::string>& terms = vocabulary();
    if (!terms.empty()) {  // (a header without a schema stays without one)
      auto* v = full_->mutable_schema()->mutable_vocabulary();
      v->Reserve(static_cast<int>(terms.size()));
      for (const std::string& t : terms) v->Add()->assign(t);
    }
  }
  return *full_;
}

const std::vector<std::string>& DocumentReader::vocabulary() const {
  if (schema_ && schema_->ok()) return (*schema_)->vocabulary();
  return terms_;
}

Result<ModelSchema> DocumentReader::schema() const {
  if (!schema_) {
    // The terms move into the schema (they stay in terms_ when it fails).
    schema_ = std::make_unique<Result<ModelSchema>>(ModelSchema::FromProto(fields_.schema(), &terms_));
  }
  return *schema_;
}

Result<std::unique_ptr<DocumentReader>> DocumentReader::Open(const std::string& path, uint32_t max_frame_bytes,
                                                             Env* env) {
  if (env == nullptr) env = Env::Default();
  std::unique_ptr<DocumentReader> r(new DocumentReader());
  r->path_ = path == "-" ? "<stdin>" : path;
  r->max_frame_ = max_frame_bytes;
  auto file = env->NewSequentialFile(path);
  if (!file.ok()) return file.status().WithContext("cannot open stream");
  r->source_ = std::make_unique<Source>(std::move(file).value());
  r->input_ = std::make_unique<pbio::CopyingInputStreamAdaptor>(r->source_.get(), 1 << 16);
  bool eof = false;
  uint32_t len = 0;
  Status st = r->ReadFrame(&eof, &len);
  if (!st.ok()) return Status::Corruption(st.message() + " (reading the stream header)");
  if (eof) return Status::Corruption("'" + r->path_ + "': empty stream: expected a StreamHeader frame, found nothing");
  if (!r->ParseHeader(r->buf_) || r->fields_.magic() != kStreamMagic) {
    return Status::Corruption("'" + r->path_ +
                              "': not a Tributary document stream (expected a StreamHeader with magic \"" +
                              kStreamMagic + "\" in the first frame)");
  }
  const uint32_t version = r->fields_.format_version();
  const int checksum = r->fields_.frame_checksum();
  if (version != kStreamFormatVersion && version != kStreamFormatVersionChecksummed) {
    return Status::Corruption("'" + r->path_ + "': stream format_version " + std::to_string(version) +
                              " is not supported (expected 1, or 2 with frame checksums)");
  }
  if (checksum != v1::StreamHeader::FRAME_CHECKSUM_NONE && checksum != v1::StreamHeader::FRAME_CHECKSUM_CRC32) {
    return Status::Corruption("'" + r->path_ + "': frame_checksum " + std::to_string(checksum) +
                              " is not supported (expected CRC32)");
  }
  const bool checksummed = checksum == v1::StreamHeader::FRAME_CHECKSUM_CRC32;
  if (checksummed != (version == kStreamFormatVersionChecksummed)) {
    return Status::Corruption("'" + r->path_ + "': inconsistent stream header: format_version " +
                              std::to_string(version) + (checksummed ? " with" : " without") +
                              " frame checksums (version 2 has them, version 1 does not)");
  }
  if (checksummed) {
    // The header's own CRC follows its frame: a damaged schema (a changed
    // term name or class) is refused too.
    uint32_t stored = 0;
    {
      pbio::CodedInputStream coded(r->input_.get());
      if (!coded.ReadLittleEndian32(&stored)) {
        if (!r->source_->error().ok()) return r->source_->error().WithContext("reading stream '" + r->path_ + "'");
        return Status::Corruption("'" + r->path_ + "': truncated stream header: the stream ended inside its checksum");
      }
    }
    const uint32_t computed = FrameCrc(r->buf_);
    if (stored != computed) {
      return Status::Corruption("'" + r->path_ + "': stream header checksum mismatch (stored " + Hex(stored) +
                                ", computed " + Hex(computed) + "): the header is damaged");
    }
    r->checksummed_ = true;
  }
  return r;
}

Status DocumentReader::Next(v1::Document* doc, bool* eof) {
  uint32_t len = 0;
  const uint64_t offset = bytes_read();
  recoverable_ = false;
  TRIB_RETURN_IF_ERROR(ReadFrame(eof, &len, /*in_place=*/true));
  if (*eof) return Status::OK();
  const uint64_t index = docs_++;
  if (checksummed_) {
    const uint32_t computed = FrameCrc(frame_);
    if (computed != frame_crc_) {
      recoverable_ = true;  // nothing of this frame is used; --skip-bad may go on with the next one
      return Status::Corruption("'" + path_ + "': document #" + std::to_string(index) + " (frame at byte " +
                                std::to_string(offset) + ", " + std::to_string(len) +
                                " bytes): checksum mismatch (stored " + Hex(frame_crc_) + ", computed " +
                                Hex(computed) + "): the frame is damaged");
    }
  }
  // A StreamHeader parses as a Document too (its magic lands in `id`): two
  // streams concatenated must not have the second header learned.
  if (frame_.size() >= sizeof(kStreamMagic) + 1 && frame_[0] == 0x0a &&
      frame_.compare(2, sizeof(kStreamMagic) - 1, kStreamMagic) == 0) {
    v1::StreamHeader h;
    if (h.ParseFromArray(frame_.data(), static_cast<int>(frame_.size())) && h.magic() == kStreamMagic) {
      recoverable_ = true;  // the framing is intact: --skip-bad may go on
      return Status::Corruption("'" + path_ + "': document #" + std::to_string(index) + " (frame at byte " +
                                std::to_string(offset) +
                                ") is a second stream header: two streams concatenated? Expected a Document");
    }
  }
  if (!doc->ParseFromArray(frame_.data(), static_cast<int>(frame_.size()))) {
    recoverable_ = true;
    return Status::Corruption("'" + path_ + "': document #" + std::to_string(index) + " (frame at byte " +
                              std::to_string(offset) + ", " + std::to_string(len) +
                              " bytes) does not parse as tributary.v1.Document");
  }
  return Status::OK();
}

Status DocumentReader::Skip(bool* eof) {
  uint32_t len = 0;
  recoverable_ = false;
  TRIB_RETURN_IF_ERROR(ReadFrame(eof, &len, /*in_place=*/true));
  if (!*eof) ++docs_;
  return Status::OK();
}

Result<uint64_t> DocumentReader::CountDocuments(const std::string& path, uint32_t max_frame_bytes, Env* env) {
  auto r = Open(path, max_frame_bytes, env);
  if (!r.ok()) return r.status();
  uint64_t n = 0;
  for (;;) {
    bool eof = false;
    uint32_t len = 0;
    TRIB_RETURN_IF_ERROR((*r)->ReadFrame(&eof, &len, /*in_place=*/true));
    if (eof) break;
    ++n;
  }
  return n;
}

// ---- Writer ----------------------------------------------------------------

DocumentWriter::DocumentWriter() = default;

DocumentWriter::~DocumentWriter() {
  if (output_) output_->Flush();
  output_.reset();
  if (sink_) (void)sink_->file()->Close();
}

Result<std::unique_ptr<DocumentWriter>> DocumentWriter::CreateRaw(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  std::unique_ptr<DocumentWriter> w(new DocumentWriter());
  w->path_ = path == "-" ? "<stdout>" : path;
  auto file = env->NewWritableFile(path);
  if (!file.ok()) return file.status();
  w->sink_ = std::make_unique<Sink>(std::move(file).value());
  w->output_ = std::make_unique<pbio::CopyingOutputStreamAdaptor>(w->sink_.get(), 1 << 16);
  return w;
}

Result<std::unique_ptr<DocumentWriter>> DocumentWriter::Create(const std::string& path, const v1::StreamHeader& header,
                                                               Env* env) {
  const int checksum = header.frame_checksum();
  if (checksum != v1::StreamHeader::FRAME_CHECKSUM_NONE && checksum != v1::StreamHeader::FRAME_CHECKSUM_CRC32) {
    return Status::InvalidArgument("writing '" + path + "': frame_checksum " + std::to_string(checksum) +
                                   " is not supported (expected NONE or CRC32)");
  }
  const bool checksummed = checksum == v1::StreamHeader::FRAME_CHECKSUM_CRC32;
  auto w = CreateRaw(path, env);
  if (!w.ok()) return w;
  v1::StreamHeader h = header;
  h.set_format_version(checksummed ? kStreamFormatVersionChecksummed : kStreamFormatVersion);
  if (!checksummed) {
    TRIB_RETURN_IF_ERROR((*w)->Write(h));
    return w;
  }
  // The header frame stays plain (a reader learns the framing from it) and
  // is followed by its CRC; from here on every frame carries one.
  DocumentWriter* dw = w->get();
  if (!h.SerializeToString(&dw->frame_)) return Status::Internal("writing '" + path + "': serialization failed");
  {
    pbio::CodedOutputStream coded(dw->output_.get());
    coded.WriteVarint64(dw->frame_.size());
    coded.WriteRaw(dw->frame_.data(), static_cast<int>(dw->frame_.size()));
    coded.WriteLittleEndian32(FrameCrc(dw->frame_));
  }
  if (!dw->sink_->error().ok()) return dw->sink_->error();
  dw->checksummed_ = true;
  return w;
}

Status DocumentWriter::WriteFrame(const std::string& bytes) {
  {
    pbio::CodedOutputStream coded(output_.get());
    coded.WriteVarint64(bytes.size());
    coded.WriteLittleEndian32(FrameCrc(bytes));
    coded.WriteRaw(bytes.data(), static_cast<int>(bytes.size()));
    if (coded.HadError() && sink_->error().ok()) return Status::IOError("writing '" + path_ + "': write failed");
  }
  return sink_->error();
}

Status DocumentWriter::Write(const google::protobuf::MessageLite& msg) {
  if (!output_) return Status::Internal("writing '" + path_ + "': the writer is closed");
  if (checksummed_) {
    if (!msg.SerializeToString(&frame_)) return Status::IOError("writing '" + path_ + "': serialization failed");
    return WriteFrame(frame_);
  }
  // A frame without checksum: varint length, then the message.
  const size_t size = msg.ByteSizeLong();
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Status::InvalidArgument("writing '" + path_ + "': a message of " + std::to_string(size) +
                                   " bytes exceeds protobuf's 2 GiB limit");
  }
  {
    pbio::CodedOutputStream coded(output_.get());
    coded.WriteVarint32(static_cast<uint32_t>(size));
    msg.SerializeWithCachedSizes(&coded);
    if (coded.HadError()) {
      return sink_->error().ok() ? Status::IOError("writing '" + path_ + "': serialization failed") : sink_->error();
    }
  }
  return sink_->error();
}

Status DocumentWriter::Flush() {
  if (!output_) return Status::Internal("writing '" + path_ + "': the writer is closed");
  if (!output_->Flush() && sink_->error().ok()) return Status::IOError("writing '" + path_ + "': write failed");
  return sink_->error();
}

Status DocumentWriter::Close() {
  if (!output_) return Status::OK();
  output_->Flush();
  output_.reset();
  Status st = sink_->error();
  Status closed = sink_->file()->Close();
  if (st.ok()) st = closed;
  return st;
}

}  // namespace tributary
