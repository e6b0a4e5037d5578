// `tributary train --distributed`: one learner per MPI rank, composed every
// round (lib/include/tributary/distributed.h), started by
// `mpirun -np N tributary train --distributed ...`.
//
// One learner (--select off, nll, SEP): sharding by document index. In
// arrival order round j covers documents [j R K, (j + 1) R K) of the stream
// (R ranks, K = --sync-every, by default no more than a rank's share of the
// stream) and rank r learns the r-th K of them, so that composing the ranks
// in order is the stream's own order; several passes over a file are
// shuffled per rank, each rank owning the documents a seeded hash of their
// index gives it. Every rank reads the whole file (frames it does not own
// are passed over without parsing). Rank 0 writes the model and the report.
//
// The defaults (a discriminative loss, --select auto) run as on one process:
// the candidates' search shared among the ranks (trainer.h TrainerGroup), or
// one pass in arrival order by the live learner on rank 0.
#include "commands/train_distributed.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "scoring_input.h"
#include "tributary/parallel.h"

#ifdef TRIBUTARY_HAVE_MPI
#include "tributary/distributed.h"
#endif

namespace tributary::cli {

#ifndef TRIBUTARY_HAVE_MPI

int ExecMpiProgram() {
#ifdef TRIBUTARY_MPI_PROGRAM
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return ReportError(Status::IOError("--distributed: cannot find this program's directory (/proc/self/exe: " +
                                       ec.message() + ") to run " + TRIBUTARY_MPI_PROGRAM));
  }
  const std::string mpi = (self.parent_path() / TRIBUTARY_MPI_PROGRAM).string();
  char** argv = ProgramArguments();
  if (argv == nullptr) return ReportError(Status::Internal("--distributed: the program's arguments were not kept"));
  ::execv(mpi.c_str(), argv);
  const int e = errno;
  return ReportError(Status::IOError("--distributed runs '" + mpi +
                                     "' (this program linked with Open MPI, installed beside it), which failed to "
                                     "start: " +
                                     std::strerror(e)));
#else
  return -1;
#endif
}

int RunTrainDistributed(const LearnFlags&, const std::string&, const std::string&, TrainMode, std::unique_ptr<Model>,
                        std::unique_ptr<DocumentReader>, uint64_t) {
  return ReportError(Status::InvalidArgument(
      "--distributed: this tributary was built without MPI (configure with -DTRIBUTARY_MPI=ON; Debian packages "
      "libopenmpi-dev and openmpi-bin)"));
}

#else

int ExecMpiProgram() { return -1; }

namespace {

// A label no decoded document has: NextOwn's "refused, go on".
constexpr int64_t kRefused = -2;

// The next document, which this rank owns. A bad one (a damaged frame that
// leaves the framing intact, or a document the model refuses) is recorded in
// `bad` (when given: the first pass) under --skip-bad and comes back with
// label kRefused; it still takes its index, so that every rank agrees on
// who owns which document.
Status NextOwn(DocumentSource* ds, Model* model, bool skip_bad, BadInput* bad, DocumentBuffer* doc, bool* eof) {
  bool grew = false;
  Status st = ds->Next(model, true, nullptr, doc, eof, &grew);
  if (st.ok()) return st;
  if (skip_bad && (ds->reader().last_error_recoverable() || st.IsInvalidDocument())) {
    if (bad != nullptr) bad->Record(st);
    doc->label = kRefused;
    return Status::OK();
  }
  return st;
}

int Run(const LearnFlags& f, const std::string& in, const std::string& out, Model* model,
        std::unique_ptr<DocumentReader>* reader, uint64_t length, const MpiSession& mpi) {
  const int rank = mpi.rank(), R = mpi.size();
  const bool lead = rank == 0;
  // Documents per rank and round: --sync-every, else the default for the
  // model's size, but no more than a rank's share of the stream when its
  // length is known (a larger round would give rank 0 every document).
  uint64_t K = f.sync_every > 0 ? f.sync_every : DefaultSyncEvery(model->stats().size());
  if (f.sync_every == 0 && length > 0) K = std::min<uint64_t>(K, (length + R - 1) / static_cast<uint64_t>(R));
  // Every rank either goes on or stops here together (a collective call
  // that some rank never reaches would hang the job).
  auto agree = [&](const Status& local, Status* agreed) { return mpi.AnyFailed(local, agreed); };
  auto report = [&](const Status& st, bool own) {
    // The failing rank says it; rank 0 says it for the others.
    if (!own && !lead) return kExitError;
    Status s = NameFile(st, in);
    if (own && !lead) s = s.WithContext("rank " + std::to_string(rank));
    return ReportError(s);
  };
  Status setup;
  if (in == "-") setup = Status::InvalidArgument("--distributed reads a file on every rank, not standard input");
  if (setup.ok() && f.restarts > 1) setup = Status::InvalidArgument("--distributed cannot be combined with --restarts");
  if (setup.ok() && f.threads_given && f.threads != 1) {
    setup = Status::InvalidArgument("--distributed runs one thread per rank: start more ranks instead of --threads");
  }
  std::unique_ptr<DistributedLearner> learner;
  if (setup.ok()) {
    LearnerOptions lo;
    lo.engine = EngineFlag(f.engine);
    lo.seed = f.seed;
    lo.effective_size = model->learner_state().effective_size;
    lo.damping = f.damping;
    auto dl = DistributedLearner::Create(model, lo, &mpi);
    if (dl.ok()) {
      learner = std::move(dl).value();
    } else {
      setup = dl.status();
    }
  }
  Status agreed;
  if (agree(setup, &agreed)) return report(agreed, !setup.ok());

  BadInput bad;
  std::function<void(const Status&)> on_bad;
  if (f.skip_bad) {
    on_bad = [&](const Status& st) {
      bad.Record(st);
      model->learner_state().skipped_documents++;
    };
  }
  Progress progress("train", f.quiet || !lead);
  uint64_t learned = 0;  // all ranks
  std::vector<DocumentBuffer> batch;
  std::vector<trib_document> views;
  // One round with this rank's documents: `views`, or else those of `batch`.
  auto round = [&](const Status& failed, uint64_t* total) -> Status {
    if (!batch.empty()) {
      views.clear();
      for (const auto& d : batch) views.push_back(d.View());
    }
    TRIB_RETURN_IF_ERROR(learner->Round(views.data(), views.size(), total, on_bad, failed));
    batch.clear();
    views.clear();
    learned = learner->stats().documents;
    progress.Tick(learned);
    return Status::OK();
  };
  // Ends the pass: rounds until no rank has documents left.
  auto drain = [&](Status failed) -> Status {
    for (;;) {
      uint64_t total = 0;
      TRIB_RETURN_IF_ERROR(round(failed, &total));
      failed = Status::OK();
      if (total == 0) return Status::OK();
    }
  };
  auto fail = [&](const Status& st) {
    const bool own = st.message().rfind("rank ", 0) != 0;
    if (lead && learned > 0) SavePartial(*model, out);
    return report(st, own);
  };
  const auto start = std::chrono::steady_clock::now();
  const bool shuffle = f.epochs > 1 && !f.no_shuffle;
  const uint32_t epochs = f.epochs > 0 ? f.epochs : 1;
  const uint64_t round_docs = K * static_cast<uint64_t>(R);
  // The next document of the stream: this rank's, decoded into `doc`
  // (*have set unless --skip-bad refused it), or another rank's, passed over.
  DocumentBuffer doc;
  // Who learns document i: in arrival order, rank r the r-th K of every
  // round (the ranks composed in order are the stream's order); shuffled,
  // a seeded hash of i, so that every rank holds a random share of every
  // part of the file (contiguous shares of a file sorted by class or time
  // gave each rank different classes, and their average lost 8 points).
  auto owner = [&](uint64_t i) {
    if (!shuffle) return static_cast<int>((i % round_docs) / K);
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ (f.seed + 0x632BE59BD9B4E019ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<int>((z ^ (z >> 31)) % static_cast<uint64_t>(R));
  };
  auto next = [&](DocumentSource* ds, BadInput* record, bool* eof, bool* have) {
    *have = false;
    if (owner(ds->next_index()) != rank) return ds->Skip(eof);
    Status st = NextOwn(ds, model, f.skip_bad, record, &doc, eof);
    *have = st.ok() && !*eof && doc.label != kRefused;
    return st;
  };
  if (shuffle) {
    // This rank's documents in memory, shuffled before each pass (a
    // generator per rank: reproducible for a fixed seed and rank count).
    DocumentSet own;
    Status read;
    auto ds = DocumentSource::OpenPass(reader, in, f.max_frame_bytes, *model);
    if (!ds.ok()) read = ds.status();
    while (read.ok()) {
      bool eof = false, have = false;
      read = next(ds->get(), &bad, &eof, &have);
      if (have) own.Add(doc);
      if (eof) break;
    }
    if (agree(read, &agreed)) return report(agreed, !read.ok());
    std::vector<uint32_t> order(own.size());
    std::iota(order.begin(), order.end(), 0u);
    std::mt19937_64 rng(f.seed * 1000003ull + static_cast<uint64_t>(rank));
    for (uint32_t e = 0; e < epochs; ++e) {
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t i = 0; i < order.size(); i += K) {
        views.clear();
        for (size_t j = i; j < std::min<size_t>(order.size(), i + K); ++j) views.push_back(own.View(order[j]));
        uint64_t total = 0;
        if (Status st = round(Status::OK(), &total); !st.ok()) return fail(st);
      }
      if (Status st = drain(Status::OK()); !st.ok()) return fail(st);
    }
  } else {
    for (uint32_t e = 0; e < epochs; ++e) {
      Status read;
      auto ds = DocumentSource::OpenPass(reader, in, f.max_frame_bytes, *model);
      if (!ds.ok()) read = ds.status();
      while (read.ok()) {
        bool eof = false, have = false;
        const uint64_t index = (*ds)->next_index();
        read = next(ds->get(), e == 0 ? &bad : nullptr, &eof, &have);
        if (have) batch.push_back(doc);
        if (!read.ok() || eof) break;
        if ((index + 1) % round_docs == 0) {
          uint64_t total = 0;
          if (Status st = round(Status::OK(), &total); !st.ok()) return fail(st);
        }
      }
      // The last, partial round (or this rank's read error, told to all).
      if (Status st = drain(read); !st.ok()) return fail(st);
    }
  }
  progress.Done(learned);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintBad(bad);
  Status saved;
  if (lead) saved = model->Save(out);
  if (agree(saved, &agreed)) return report(agreed, !saved.ok());
  if (lead && !f.quiet) {
    const DistributedStats& ds = learner->stats();
    std::cerr << "trained " << model->family().name << " by " << EngineName(learner->learner().engine()) << " on "
              << learned << " documents on " << R << " MPI ranks (" << epochs << " pass(es), " << ds.rounds
              << " rounds of up to " << K
              << " documents per rank; rank 0: " << Fmt(static_cast<double>(ds.allreduce_bytes) / 1048576.0, 4)
              << " MiB in Allreduce, " << Fmt(ds.allreduce_seconds, 3) << " s in it, " << Fmt(ds.wait_seconds, 3)
              << " s waiting) in " << Fmt(secs, 3) << " s ("
              << Fmt(static_cast<double>(learned) / std::max(secs, 1e-9), 4) << " documents/s) -> " << out << std::endl;
  }
  return kExitOk;
}

// The defaults on the ranks: the search shared (kSelect) or the live learner
// on rank 0 (kLive); the same model as one process either way.
int RunDefaults(const LearnFlags& f, const std::string& in, const std::string& out, TrainMode mode,
                std::unique_ptr<Model> model, std::unique_ptr<DocumentReader> reader, uint64_t length,
                const MpiSession& mpi) {
  const bool lead = mpi.rank() == 0;
  Status setup;
  if (in == "-") setup = Status::InvalidArgument("--distributed reads a file on every rank, not standard input");
  if (setup.ok() && f.threads_given && f.threads != 1) {
    setup = Status::InvalidArgument("--distributed runs one thread per rank: start more ranks instead of --threads");
  }
  Status agreed;
  if (mpi.AnyFailed(setup, &agreed)) return lead || !setup.ok() ? ReportError(agreed) : kExitError;
  if (mode == TrainMode::kSelect) {
    MpiTrainerGroup group(&mpi, &Registry());
    return RunTrainSelect(f, in, out, std::move(model), std::move(reader), length, &group);
  }
  // One pass in arrival order is one sequence of steps: rank 0 learns it.
  int rc = kExitOk;
  if (lead) {
    if (!f.quiet) {
      std::cerr << "tributary: --distributed: one pass in arrival order is learned by the live learner on rank 0 "
                   "(it is sequential; --select off shares one learner among the ranks)"
                << std::endl;
    }
    rc = RunTrainLive(f, in, out, std::move(reader), length);
  }
  const Status done = rc == kExitOk ? Status::OK() : Status::Internal("rank 0 failed");
  return mpi.AnyFailed(done, &agreed) ? kExitError : kExitOk;
}

}  // namespace

int RunTrainDistributed(const LearnFlags& f, const std::string& in, const std::string& out, TrainMode mode,
                        std::unique_ptr<Model> model, std::unique_ptr<DocumentReader> reader, uint64_t length) {
  auto session = MpiSession::Init(nullptr, nullptr);
  if (!session.ok()) return ReportError(session.status());
  try {
    if (mode != TrainMode::kOneLearner) {
      return RunDefaults(f, in, out, mode, std::move(model), std::move(reader), length, **session);
    }
    return Run(f, in, out, model.get(), &reader, length, **session);
  } catch (const std::exception& ex) {
    // A rank that cannot reach the next collective call must not leave the
    // others waiting in it.
    std::cerr << "tributary: error: rank " << (*session)->rank() << ": unexpected failure (" << ex.what()
              << "); aborting the MPI job" << std::endl;
    (*session)->Abort(kExitError);
  }
}

#endif

}  // namespace tributary::cli
