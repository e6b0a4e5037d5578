// Stream files from Python: one read back as Python objects (StreamReader)
// and documents written as one (write_stream).
#ifndef TRIBUTARY_PYTHON_SRC_STREAM_IO_H_
#define TRIBUTARY_PYTHON_SRC_STREAM_IO_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common.h"
#include "tributary/stream_io.h"

namespace tributary::python {

// A stream file read back as Python objects: header() and, per document,
// (x, y, id) with x the text, a dict term -> count (term names from the
// header's vocabulary; hashed ids as "#<id>"), or a dict feature -> value.
class StreamIter {
 public:
  StreamIter(const std::string& path, uint32_t max_frame_bytes);
  py::dict header() const;
  py::tuple Next();

 private:
  std::string path_;
  std::unique_ptr<DocumentReader> reader_;
};

// Writes documents (text or dict term -> count; labels; ids) as a stream
// whose header has an open vocabulary and open classes, as `convert
// --open-vocabulary` of live text does: `tributary train --in path` learns it.
uint64_t WriteStream(const std::string& path, const py::sequence& xs, const py::object& ys, const py::object& ids,
                     const std::string& source);

}  // namespace tributary::python

#endif  // TRIBUTARY_PYTHON_SRC_STREAM_IO_H_
