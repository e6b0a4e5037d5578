// Distributed learning over Open MPI: one shard per rank, composed every
// round with MPI_Allreduce (`mpirun -np N tributary train --distributed`).
//
// The rule is parallel.h's, with ranks instead of threads: in each round
// every rank learns its own documents from the same statistics (its step
// counter starting where the ranks before it end, MPI_Exscan), the ranks
// exchange their block maps (MPI_Allgather, O(blocks)), and the sum of the
// ranks' contributions (ShardComposition::AddContribution, one double per
// statistic) is formed by MPI_Allreduce; every rank then holds the same
// composed model. NLL on naive Bayes gives the sequential pass over the
// documents in rank order; NCLL / hinge are averaged weighted by the ranks'
// documents; SEP's site changes are composed (summed, late in a stream).
//
// Failure: every collective call is made by every rank the same number of
// times. A rank whose document fails tells the others in the same round
// (MPI_Allreduce of a flag; the message is broadcast), so every rank returns
// the error and nothing hangs; a rank that dies is Open MPI's to notice
// (mpirun aborts the job and names the rank).
//
// Built only with -DTRIBUTARY_MPI=ON (the default; Debian's libopenmpi-dev).
// Thread safety: MPI is initialised for one thread (MPI_THREAD_FUNNELED);
// call everything from the thread that made the MpiSession.
#ifndef TRIBUTARY_DISTRIBUTED_H_
#define TRIBUTARY_DISTRIBUTED_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tributary/learner.h"
#include "tributary/model.h"
#include "tributary/parallel.h"
#include "tributary/status.h"
#include "tributary/trainer.h"

namespace tributary {

/// MPI_Init .. MPI_Finalize. One per process.
class MpiSession {
 public:
  /// MPI_Init_thread (MPI_THREAD_FUNNELED) with the program's arguments, MPI
  /// errors returned as codes (MPI_ERRORS_RETURN), and this rank's rank, size
  /// and host read. Errors: InvalidArgument when MPI is already initialised in
  /// this process; IOError naming MPI's error when initialisation fails.
  static Result<std::unique_ptr<MpiSession>> Init(int* argc, char*** argv);
  ~MpiSession();  ///< MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }  ///< this process's rank in MPI_COMM_WORLD, 0 .. size() - 1
  int size() const { return size_; }  ///< the number of ranks in MPI_COMM_WORLD
  /// The processor name of this rank (MPI_Get_processor_name).
  const std::string& host() const { return host_; }
  /// Sum of `value` over the ranks (collective).
  Result<uint64_t> SumAll(uint64_t value) const;
  /// True on every rank if `local` is an error on any (collective). *agreed
  /// gets `local` on a rank where it failed and, on the others, the lowest
  /// failing rank's error (its code, its message prefixed "rank R: ").
  bool AnyFailed(const Status& local, Status* agreed) const;
  /// MPI_Abort on every rank with `code`: for a rank that cannot reach the
  /// next collective call.
  [[noreturn]] void Abort(int code) const;

 private:
  MpiSession() = default;
  int rank_ = 0, size_ = 1;
  std::string host_;
};

/// The MPI ranks as a TrainerGroup (trainer.h): `train --distributed` shares
/// the defaults' search among the ranks (each learns its own candidates), so
/// that N ranks keep the model one process keeps. Borrows the session and the
/// registry; call it from the session's thread.
class MpiTrainerGroup final : public TrainerGroup {
 public:
  /// Over `session`'s ranks; models sent between them are parsed with `registry`.
  MpiTrainerGroup(const MpiSession* session, const PluginRegistry* registry) : session_(session), registry_(registry) {}
  int rank() const override { return session_->rank(); }
  int size() const override { return session_->size(); }
  Status SumAll(std::vector<double>* values) const override;
  bool AnyFailed(const Status& local, Status* agreed) const override { return session_->AnyFailed(local, agreed); }
  Status Broadcast(int root, std::string* bytes) const override;
  const PluginRegistry& registry() const override { return *registry_; }

 private:
  const MpiSession* session_;
  const PluginRegistry* registry_;
};

/// What a DistributedLearner has done so far, on this rank.
struct DistributedStats {
  uint64_t rounds = 0;           ///< rounds completed with documents (empty and failed rounds not counted)
  uint64_t documents = 0;        ///< learned by all ranks (refused ones left out)
  uint64_t allreduce_bytes = 0;  ///< per rank, summed over rounds
  double allreduce_seconds = 0;  ///< per rank: time in the statistics' Allreduce
  double wait_seconds = 0;       ///< per rank: time waiting for the others (the round's first collective)
};

/// Learns one model on every rank, composed every round (the rule at the top
/// of this file). Call everything from the MpiSession's thread.
class DistributedLearner {
 public:
  /// Every rank's `model` must start equal (same schema, settings, seed).
  /// Errors: parallel.h's (EP and ADF refused); a schema that may grow.
  static Result<std::unique_ptr<DistributedLearner>> Create(Model* model, const LearnerOptions& options,
                                                            const MpiSession* session);
  ~DistributedLearner();

  /// One round (collective: every rank calls it, with its own documents,
  /// maybe none). *total receives the documents all ranks brought to this
  /// round: 0 on every rank when every rank is out of documents. When
  /// `on_bad` is set, a refused document is reported through it and left
  /// out. `failed`, when an error, is this rank's failure before the round
  /// (e.g. reading its documents): the round then fails on every rank. On
  /// error (this rank's, or another's, named by rank) every rank returns it
  /// and every model is as it was before the round.
  Status Round(const trib_document* docs, size_t n, uint64_t* total,
               const std::function<void(const Status&)>& on_bad = nullptr, const Status& failed = Status::OK());

  /// This rank's learner (its engine's counters); its seed is the options'
  /// seed + rank.
  const Learner& learner() const { return *learner_; }
  const DistributedStats& stats() const { return stats_; }  ///< this rank's totals so far

 private:
  DistributedLearner() = default;
  Model* model_ = nullptr;
  const MpiSession* session_ = nullptr;
  std::unique_ptr<Learner> learner_;
  BlockTrace trace_;
  SufficientStats base_;
  ShardComposition plan_;
  std::vector<double> acc_, packed_, gathered_;
  DistributedStats stats_;
};

}  // namespace tributary

#endif  // TRIBUTARY_DISTRIBUTED_H_
