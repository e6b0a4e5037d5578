// LineSource: the lines of a text input for the converters (line_source.h).
#include "line_source.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace tributary::convert_internal {

Result<std::unique_ptr<LineSource>> LineSource::Open(const std::string& path, bool live) {
  std::unique_ptr<LineSource> src(new LineSource());
  if (path == "-" && live && !IsRegularFile(0)) {
    src->name_ = "<stdin>";
    src->fp_ = stdin;
    src->owns_fp_ = false;
    src->live_ = true;
    return src;
  }
  if (path == "-") {
    src->name_ = "<stdin>";
    src->memory_ = true;
    char buf[1 << 16];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) src->data_.append(buf, n);
    if (std::ferror(stdin)) return Status::IOError(std::string("reading <stdin>: ") + std::strerror(errno));
    return src;
  }
  src->name_ = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
      return Status::NotFound("input file '" + path + "' not found: " + std::strerror(e));
    }
    return Status::IOError("cannot open input file '" + path + "': " + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("input '" + path + "' is a directory, expected a file");
  }
  src->live_ = live && !S_ISREG(st.st_mode);
  src->fp_ = std::fopen(path.c_str(), "rb");
  if (src->fp_ == nullptr) {
    const int e = errno;
    if (e == ENOENT) return Status::NotFound("input file '" + path + "' not found: " + std::strerror(e));
    return Status::IOError("cannot open input file '" + path + "': " + std::strerror(e));
  }
  return src;
}

LineSource::~LineSource() {
  if (fp_ != nullptr && owns_fp_) std::fclose(fp_);
}

Status LineSource::Rewind() {
  if (live_) {
    if (line_ == 0) return Status::OK();
    return Status::Internal("'" + name_ + "' is read as it arrives and cannot be read twice");
  }
  line_ = 0;
  pos_ = 0;
  if (fp_ != nullptr) {
    if (std::fseek(fp_, 0, SEEK_SET) != 0) {
      return Status::IOError("cannot rewind '" + name_ + "' for the second pass: " + std::strerror(errno));
    }
    std::clearerr(fp_);
  }
  return Status::OK();
}

Status LineSource::Next(std::string_view* line, bool* eof) {
  *eof = false;
  if (memory_) {
    if (pos_ >= data_.size()) {
      *eof = true;
      return Status::OK();
    }
    const size_t nl = data_.find('\n', pos_);
    const size_t end = nl == std::string::npos ? data_.size() : nl;
    *line = std::string_view(data_).substr(pos_, end - pos_);
    pos_ = nl == std::string::npos ? data_.size() : nl + 1;
  } else {
    // One line, bounded: a file with no newline in sight (/dev/zero, a
    // binary file given by mistake) is refused at kMaxLineBytes instead
    // of being read into memory until it fails.
    errno = 0;
    line_buf_.clear();
    int c = EOF;
    bool any = false;
    while ((c = getc_unlocked(fp_)) != EOF) {
      any = true;
      if (c == '\n') break;
      if (line_buf_.size() >= kMaxLineBytes) {
        return Status::InvalidDocument("'" + name_ + "' line " + std::to_string(line_ + 1) + ": longer than " +
                                       std::to_string(kMaxLineBytes >> 20) +
                                       " MiB without a newline (a binary file or a device?)");
      }
      line_buf_.push_back(static_cast<char>(c));
    }
    if (c == EOF && std::ferror(fp_)) {
      return Status::IOError("reading '" + name_ + "' after line " + std::to_string(line_) + ": " +
                             std::strerror(errno));
    }
    if (!any) {
      *eof = true;
      return Status::OK();
    }
    *line = line_buf_;
  }
  ++line_;
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  return Status::OK();
}

bool LineSource::IsRegularFile(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

Status LineError(const LineSource& src, const std::string& what) {
  return Status::InvalidDocument("'" + src.name() + "' line " + std::to_string(src.line()) + ": " + what);
}

}  // namespace tributary::convert_internal
