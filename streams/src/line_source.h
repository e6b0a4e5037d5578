// Private to the converters (convert*.cc): the lines of a text input, read
// twice (a file, or standard input buffered in memory) or once, as they
// arrive (a pipe, terminal, FIFO or socket: a live input).
#ifndef TRIBUTARY_STREAMS_SRC_LINE_SOURCE_H_
#define TRIBUTARY_STREAMS_SRC_LINE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "tributary/status.h"

namespace tributary::convert_internal {

// The longest line a text input may have (tsv, svmlight).
constexpr size_t kMaxLineBytes = size_t{64} << 20;

// Lines of a file, readable more than once. Standard input is buffered in
// memory so that it can be read twice too.
class LineSource {
 public:
  // `live`: a pipe, terminal, FIFO or socket is read once, line by line as
  // it arrives (live() is then true); otherwise standard input is buffered.
  // Errors: NotFound (no such file), InvalidArgument (a directory), IOError.
  static Result<std::unique_ptr<LineSource>> Open(const std::string& path, bool live);

  ~LineSource();
  LineSource(const LineSource&) = delete;
  LineSource& operator=(const LineSource&) = delete;

  const std::string& name() const { return name_; }
  // Read once, as it arrives (no second pass: Rewind fails).
  bool live() const { return live_; }
  // 1-based number of the line last returned.
  uint64_t line() const { return line_; }

  // Back to the first line, for another pass. Errors: Internal for a live
  // input already read from, IOError.
  Status Rewind();

  // The next line without its "\n" or "\r\n"; *eof at the end. The line
  // stays valid until the next call. Errors: InvalidDocument for a line
  // longer than kMaxLineBytes, IOError.
  Status Next(std::string_view* line, bool* eof);

 private:
  LineSource() = default;
  static bool IsRegularFile(int fd);
  std::string name_;
  bool memory_ = false;
  bool live_ = false;
  bool owns_fp_ = true;
  std::string data_;
  size_t pos_ = 0;
  FILE* fp_ = nullptr;
  std::string line_buf_;  // the line Next returned last (read from fp_)
  uint64_t line_ = 0;
};

// InvalidDocument "'NAME' line N: WHAT", for the line `src` returned last.
Status LineError(const LineSource& src, const std::string& what);

}  // namespace tributary::convert_internal

#endif  // TRIBUTARY_STREAMS_SRC_LINE_SOURCE_H_
