// `tributary convert`: tsv or svmlight text to a document stream.
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "commands/commands.h"
#include "tributary/convert.h"

namespace tributary::cli {
namespace {

struct ConvertFlags {
  ConvertOptions options;
  bool quiet = false;
};

int RunConvert(const ConvertOptions& o, bool quiet) {
  ConvertReport report;
  Status st = ConvertFile(o, &report);
  if (!st.ok()) return ReportError(NameFile(st, o.in));
  if (!quiet) {
    if (o.open_vocabulary) {
      std::cerr << "read '" << (o.in == "-" ? "<stdin>" : o.in) << "' in one pass: open vocabulary, classes open"
                << std::endl;
    } else if (report.hashed_dim > 0) {
      std::cerr << "read '" << (o.in == "-" ? "<stdin>" : o.in) << "' as it arrived: terms hashed into "
                << report.hashed_dim << " ids, classes open" << std::endl;
    }
    std::cerr << "converted " << report.documents << " documents (" << report.unlabelled << " unlabelled, "
              << report.skipped << " skipped, " << report.empty << " empty lines dropped), " << report.terms
              << " terms, " << report.classes << " classes -> " << o.out << std::endl;
  }
  return kExitOk;
}

}  // namespace

Runner SetUpConvert(CLI::App* cmd) {
  auto f = std::make_shared<ConvertFlags>();
  cmd->add_option("--format", f->options.format, "tsv or svmlight")
      ->required()
      ->check(CLI::IsMember({"tsv", "svmlight"}));
  cmd->add_option("--in", f->options.in, "input text file")->required();
  cmd->add_option("--out", f->options.out, "output stream (.pb)")->required();
  cmd->add_flag("--stop-words", f->options.stop_words, "tsv: drop English stop words");
  cmd->add_option("--hashed-dim", f->options.hashed_dim, "tsv: hash terms into this many ids instead of a vocabulary");
  cmd->add_option("--features", f->options.features, "svmlight: counts (bag of words) or reals (dense features)")
      ->check(CLI::IsMember({"counts", "reals"}))
      ->capture_default_str();
  cmd->add_option("--dim", f->options.dim, "svmlight reals: number of features (default: largest index in the file)");
  cmd->add_flag("--open-classes", f->options.open_classes, "let unknown labels add classes during training");
  cmd->add_flag("--open-vocabulary", f->options.open_vocabulary,
                "tsv: one pass, documents carry their words as text and a model (family multinomial or "
                "multinomial-mixture) adds the words it has not seen; classes open. Instead of --hashed-dim");
  cmd->add_flag("--skip-bad", f->options.skip_bad, "skip malformed lines instead of stopping");
  cmd->add_flag("--live,!--no-live", f->options.live,
                "tsv from a pipe, terminal or FIFO: write each document as soon as its line is complete (terms "
                "hashed, --hashed-dim or 2^18; classes open); --no-live reads it to the end first (two passes, a "
                "vocabulary)")
      ->capture_default_str();
  cmd->add_flag("--frame-checksum,!--no-frame-checksum", f->options.frame_checksum,
                "write a CRC with every frame (stream format 2, the default), so that readers refuse a damaged "
                "file instead of learning it; --no-frame-checksum writes format 1, for readers older than format 2")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", f->quiet, "no summary on stderr");
  return [f] { return RunOnInput(f->options.in, [&] { return RunConvert(f->options, f->quiet); }); };
}

}  // namespace tributary::cli
