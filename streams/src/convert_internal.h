// Private to the converters (convert.cc, convert_tsv.cc, convert_svmlight.cc):
// each format's converter, and the pieces both use. ConvertFile
// (tributary/convert.h) checks the options, opens the input and hands it to
// the format's converter.
#ifndef TRIBUTARY_STREAMS_SRC_CONVERT_INTERNAL_H_
#define TRIBUTARY_STREAMS_SRC_CONVERT_INTERNAL_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "line_source.h"
#include "tributary/convert.h"
#include "tributary/status.h"
#include "tributary/stream_io.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary::convert_internal {

// The converters of the two formats (the formats and the passes are at the
// top of tributary/convert.h). `opt` is checked; `src` is open, read from
// its start; *report is zero and filled on success.
Status ConvertTsv(const ConvertOptions& opt, LineSource* src, ConvertReport* report);       // convert_tsv.cc
Status ConvertSvmlight(const ConvertOptions& opt, LineSource* src, ConvertReport* report);  // convert_svmlight.cc

// `s` with every byte that is not part of a valid UTF-8 sequence replaced by
// U+FFFD: protobuf string fields must hold valid UTF-8.
std::string ToValidUtf8(std::string_view s);

bool IsSpace(char c);  // ' ', \t, \v, \f or \r
std::string_view Trim(std::string_view s);

// 's' quoted for an error message, shortened when long: the input's bytes
// made printable (utf8.h Printable: a control such as ESC or an invalid byte
// is shown as \xNN; an error message must not drive the user's terminal).
std::string Quote(std::string_view s);

// IOError: the input gave `written` documents in the second pass after
// `expected` in the first (it changed in between).
Status CountMismatch(const LineSource& src, uint64_t expected, uint64_t written);

// Writes the header, then the documents produced by `produce`, and closes.
// The output is removed when anything fails.
template <typename Produce>
Status WriteStream(const std::string& out, const v1::StreamHeader& header, Produce&& produce) {
  auto writer = DocumentWriter::Create(out, header);
  if (!writer.ok()) return writer.status();
  Status st = produce(writer->get());
  Status closed = (*writer)->Close();
  if (st.ok()) st = std::move(closed);
  if (!st.ok() && out != "-") std::remove(out.c_str());
  return st;
}

}  // namespace tributary::convert_internal

#endif  // TRIBUTARY_STREAMS_SRC_CONVERT_INTERNAL_H_
