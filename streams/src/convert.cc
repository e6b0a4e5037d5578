// ConvertFile (tributary/convert.h): checks the options, opens the input
// and hands it to the format's converter (convert_tsv.cc,
// convert_svmlight.cc); and the pieces both converters use
// (convert_internal.h).
#include "tributary/convert.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <string_view>

#include "convert_internal.h"
#include "line_source.h"
#include "tributary/schema.h"
#include "tributary/utf8.h"

namespace tributary {

namespace convert_internal {

std::string ToValidUtf8(std::string_view s) {
  size_t bad = InvalidUtf8At(s);  // utf8.h: the one definition of valid UTF-8
  if (bad == std::string_view::npos) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  while (bad != std::string_view::npos) {
    out.append(s.substr(0, bad));
    out += "\xEF\xBF\xBD";
    s.remove_prefix(bad + 1);
    bad = InvalidUtf8At(s);
  }
  out.append(s);
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string Quote(std::string_view s) { return "'" + Printable(s, 60) + "'"; }

Status CountMismatch(const LineSource& src, uint64_t expected, uint64_t written) {
  return Status::IOError("'" + src.name() + "' changed while it was being converted: the first pass found " +
                         std::to_string(expected) + " documents, the second " + std::to_string(written));
}

}  // namespace convert_internal

namespace {

using convert_internal::LineSource;

Status CheckOptions(const ConvertOptions& opt) {
  if (opt.format != "tsv" && opt.format != "svmlight") {
    return Status::InvalidArgument("unknown input format '" + opt.format + "' (expected tsv or svmlight)");
  }
  if (opt.in.empty()) return Status::InvalidArgument("no input file given");
  if (opt.out.empty()) return Status::InvalidArgument("no output file given");
  if (opt.format == "tsv") {
    if (opt.features != "counts") {
      return Status::InvalidArgument("features='" + opt.features + "' applies to svmlight input only (tsv is text)");
    }
    if (opt.dim != 0) return Status::InvalidArgument("dim applies to svmlight input with features=reals only");
    if (opt.open_vocabulary && opt.hashed_dim != 0) {
      return Status::InvalidArgument(
          "open_vocabulary and hashed_dim are two ways of reading terms nobody listed in advance; expected one of "
          "them (an open vocabulary names its terms, hashed ids need none)");
    }
    if (opt.hashed_dim > kMaxHashedDim) {
      return Status::InvalidArgument("hashed_dim " + std::to_string(opt.hashed_dim) + " exceeds the maximum " +
                                     std::to_string(kMaxHashedDim) +
                                     " (2^24; a stream with more could not be read: schema.h)");
    }
  } else {
    if (opt.features != "counts" && opt.features != "reals") {
      return Status::InvalidArgument("unknown svmlight features '" + opt.features + "' (expected counts or reals)");
    }
    if (opt.stop_words) return Status::InvalidArgument("stop words apply to tsv (text) input only");
    if (opt.hashed_dim != 0) return Status::InvalidArgument("hashed term ids apply to tsv (text) input only");
    if (opt.open_vocabulary) return Status::InvalidArgument("an open vocabulary applies to tsv (text) input only");
    if (opt.dim != 0 && opt.features != "reals") {
      return Status::InvalidArgument("dim applies to svmlight input with features=reals only");
    }
  }
  if (opt.in != "-" && opt.out != "-") {
    struct stat a {
    }, b{};
    if (::stat(opt.in.c_str(), &a) == 0 && ::stat(opt.out.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
      return Status::InvalidArgument("the output '" + opt.out + "' is the input file '" + opt.in + "'");
    }
  }
  return Status::OK();
}

}  // namespace

Status ConvertFile(const ConvertOptions& options, ConvertReport* report) {
  ConvertReport local;
  if (report == nullptr) report = &local;
  *report = ConvertReport();
  TRIB_RETURN_IF_ERROR(CheckOptions(options));
  // Only tsv is converted live; svmlight needs its whole input (the largest
  // index, the label set) before it writes the header.
  auto src = LineSource::Open(options.in, options.live && options.format == "tsv");
  if (!src.ok()) return src.status();
  if (options.format == "tsv") return convert_internal::ConvertTsv(options, src->get(), report);
  return convert_internal::ConvertSvmlight(options, src->get(), report);
}

}  // namespace tributary
