#include "tributary/stream_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <cerrno>
#include <cstring>

namespace tributary {

namespace pbio = google::protobuf::io;

v1::StreamHeader NewStreamHeader() {
  v1::StreamHeader h;
  h.set_magic(kStreamMagic);
  h.set_format_version(1);
  return h;
}

DocumentReader::~DocumentReader() {
  input_.reset();
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

uint64_t DocumentReader::bytes_read() const { return input_ ? static_cast<uint64_t>(input_->ByteCount()) : 0; }

Status DocumentReader::ReadFrame(bool* eof, uint32_t* size) {
  *eof = false;
  const void* data;
  int avail = 0;
  // Peek for a clean end of stream.
  do {
    if (!input_->Next(&data, &avail)) {
      if (input_->GetErrno() != 0) {
        return Status::IOError("reading '" + path_ + "': " + std::strerror(input_->GetErrno()));
      }
      *eof = true;
      return Status::OK();
    }
  } while (avail == 0);
  input_->BackUp(avail);
  const uint64_t offset = bytes_read();
  pbio::CodedInputStream coded(input_.get());
  uint32_t len = 0;
  if (!coded.ReadVarint32(&len)) {
    return Status::Corruption("'" + path_ + "': truncated or invalid frame length at byte " + std::to_string(offset) +
                              " (frame " + std::to_string(docs_ + 1) + ")");
  }
  if (len > max_frame_) {
    return Status::Corruption("'" + path_ + "': frame at byte " + std::to_string(offset) + " declares " +
                              std::to_string(len) + " bytes, over the limit of " + std::to_string(max_frame_) +
                              " bytes (garbage, or raise --max-frame-bytes)");
  }
  buf_.resize(len);
  if (len > 0 && !coded.ReadRaw(buf_.data(), static_cast<int>(len))) {
    return Status::Corruption("'" + path_ + "': truncated frame at byte " + std::to_string(offset) + ": expected " +
                              std::to_string(len) + " bytes, the stream ended first");
  }
  *size = len;
  return Status::OK();
}

Result<std::unique_ptr<DocumentReader>> DocumentReader::Open(const std::string& path, uint32_t max_frame_bytes) {
  std::unique_ptr<DocumentReader> r(new DocumentReader());
  r->path_ = path == "-" ? "<stdin>" : path;
  r->max_frame_ = max_frame_bytes;
  if (path == "-") {
    r->fd_ = 0;
  } else {
    r->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (r->fd_ < 0) {
      return Status::NotFound("cannot open stream '" + path + "': " + std::strerror(errno));
    }
    r->owns_fd_ = true;
  }
  r->input_ = std::make_unique<google::protobuf::io::FileInputStream>(r->fd_, 1 << 16);
  bool eof = false;
  uint32_t len = 0;
  Status st = r->ReadFrame(&eof, &len);
  if (!st.ok()) return Status::Corruption(st.message() + " (reading the stream header)");
  if (eof) return Status::Corruption("'" + r->path_ + "': empty stream: expected a StreamHeader frame, found nothing");
  if (!r->header_.ParseFromString(r->buf_) || r->header_.magic() != kStreamMagic) {
    return Status::Corruption("'" + r->path_ +
                              "': not a Tributary document stream (expected a StreamHeader with magic \"" +
                              kStreamMagic + "\" in the first frame)");
  }
  if (r->header_.format_version() != 1) {
    return Status::Corruption("'" + r->path_ + "': stream format_version " +
                              std::to_string(r->header_.format_version()) + " is not supported (expected 1)");
  }
  return r;
}

Status DocumentReader::Next(v1::Document* doc, bool* eof) {
  uint32_t len = 0;
  const uint64_t offset = bytes_read();
  recoverable_ = false;
  TRIB_RETURN_IF_ERROR(ReadFrame(eof, &len));
  if (*eof) return Status::OK();
  const uint64_t index = docs_++;
  if (!doc->ParseFromString(buf_)) {
    recoverable_ = true;
    return Status::Corruption("'" + path_ + "': document #" + std::to_string(index) + " (frame at byte " +
                              std::to_string(offset) + ", " + std::to_string(len) +
                              " bytes) does not parse as tributary.v1.Document");
  }
  return Status::OK();
}

Result<uint64_t> DocumentReader::CountDocuments(const std::string& path, uint32_t max_frame_bytes) {
  auto r = Open(path, max_frame_bytes);
  if (!r.ok()) return r.status();
  uint64_t n = 0;
  for (;;) {
    bool eof = false;
    uint32_t len = 0;
    TRIB_RETURN_IF_ERROR((*r)->ReadFrame(&eof, &len));
    if (eof) break;
    ++n;
  }
  return n;
}

// ---- Writer ----------------------------------------------------------------

DocumentWriter::~DocumentWriter() {
  if (output_) output_->Flush();
  output_.reset();
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<DocumentWriter>> DocumentWriter::CreateRaw(const std::string& path) {
  std::unique_ptr<DocumentWriter> w(new DocumentWriter());
  w->path_ = path == "-" ? "<stdout>" : path;
  if (path == "-") {
    w->fd_ = 1;
  } else {
    w->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd_ < 0) return Status::IOError("cannot create '" + path + "': " + std::strerror(errno));
    w->owns_fd_ = true;
  }
  w->output_ = std::make_unique<google::protobuf::io::FileOutputStream>(w->fd_, 1 << 16);
  return w;
}

Result<std::unique_ptr<DocumentWriter>> DocumentWriter::Create(const std::string& path,
                                                               const v1::StreamHeader& header) {
  auto w = CreateRaw(path);
  if (!w.ok()) return w;
  TRIB_RETURN_IF_ERROR((*w)->Write(header));
  return w;
}

Status DocumentWriter::Write(const google::protobuf::Message& msg) {
  if (!google::protobuf::util::SerializeDelimitedToZeroCopyStream(msg, output_.get())) {
    return Status::IOError("writing '" + path_ + "': " + std::strerror(output_->GetErrno()));
  }
  return Status::OK();
}

Status DocumentWriter::Close() {
  if (!output_) return Status::OK();
  bool ok = output_->Flush();
  int e = output_->GetErrno();
  output_.reset();
  if (owns_fd_ && fd_ >= 0) {
    if (::close(fd_) != 0 && ok) {
      ok = false;
      e = errno;
    }
    fd_ = -1;
  }
  if (!ok) return Status::IOError("writing '" + path_ + "': " + std::strerror(e));
  return Status::OK();
}

}  // namespace tributary
