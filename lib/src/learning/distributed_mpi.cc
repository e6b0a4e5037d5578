#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "tributary/distributed.h"

namespace tributary {

namespace {

// MPI counts are ints: long vectors go in pieces.
constexpr size_t kMaxCount = size_t{1} << 27;

Status MpiError(int rc, const char* call) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::IOError(std::string("MPI: ") + call + " failed: " + std::string(text, static_cast<size_t>(len)));
}

#define TRIB_MPI(call, name)                            \
  do {                                                  \
    const int _rc = (call);                             \
    if (_rc != MPI_SUCCESS) return MpiError(_rc, name); \
  } while (0)

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

// ---- MpiSession ----------------------------------------------------------------

Result<std::unique_ptr<MpiSession>> MpiSession::Init(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Status::InvalidArgument("MPI is already initialised in this process");
  int provided = 0;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init_thread");
  // Errors come back as codes (turned into Status), not as an abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiSession> s(new MpiSession());
  MPI_Comm_rank(MPI_COMM_WORLD, &s->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &s->size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  s->host_.assign(name, static_cast<size_t>(len));
  return s;
}

MpiSession::~MpiSession() { MPI_Finalize(); }

Result<uint64_t> MpiSession::SumAll(uint64_t value) const {
  uint64_t sum = 0;
  TRIB_MPI(MPI_Allreduce(&value, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return sum;
}

bool MpiSession::AnyFailed(const Status& local, Status* agreed) const {
  // The lowest failing rank (size_ when none), then its message.
  int mine = local.ok() ? size_ : rank_, lowest = size_;
  if (MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) {
    *agreed = Status::IOError("MPI: agreeing on the round's outcome failed");
    return true;
  }
  if (lowest == size_) return false;
  std::string text = local.ok() ? std::string() : local.message();
  int head[2] = {static_cast<int>(local.code()), static_cast<int>(std::min<size_t>(text.size(), 4096))};
  MPI_Bcast(head, 2, MPI_INT, lowest, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(head[1]));
  MPI_Bcast(text.data(), head[1], MPI_CHAR, lowest, MPI_COMM_WORLD);
  if (!local.ok()) {
    *agreed = local;
    return true;
  }
  // The same kind of error, said to be another rank's.
  *agreed = Status::FromCode(static_cast<Status::Code>(head[0]), "rank " + std::to_string(lowest) + ": " + text);
  return true;
}

void MpiSession::Abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // not reached
}

// ---- MpiTrainerGroup --------------------------------------------------------------

Status MpiTrainerGroup::SumAll(std::vector<double>* values) const {
  std::vector<double> sum(values->size());
  for (size_t at = 0; at < values->size(); at += kMaxCount) {
    const int n = static_cast<int>(std::min(kMaxCount, values->size() - at));
    TRIB_MPI(MPI_Allreduce(values->data() + at, sum.data() + at, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
             "MPI_Allreduce");
  }
  *values = std::move(sum);
  return Status::OK();
}

Status MpiTrainerGroup::Broadcast(int root, std::string* bytes) const {
  uint64_t size = bytes->size();
  TRIB_MPI(MPI_Bcast(&size, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
  bytes->resize(size);
  for (size_t at = 0; at < size; at += kMaxCount) {
    const int n = static_cast<int>(std::min<size_t>(kMaxCount, size - at));
    TRIB_MPI(MPI_Bcast(bytes->data() + at, n, MPI_CHAR, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  return Status::OK();
}

// ---- DistributedLearner ----------------------------------------------------------

DistributedLearner::~DistributedLearner() = default;

Result<std::unique_ptr<DistributedLearner>> DistributedLearner::Create(Model* model, const LearnerOptions& options,
                                                                       const MpiSession* session) {
  if (model == nullptr || session == nullptr) return Status::InvalidArgument("distributed learner: no model or MPI");
  // (A latent family's classes only name documents for evaluation: they may
  // come and go per rank without changing the statistics' layout.)
  if ((model->schema().open_classes() && !model->latent_outputs()) || model->schema().open_vocabulary()) {
    return Status::InvalidArgument(
        "--distributed needs a stream whose classes and vocabulary are fixed in its header (every rank must hold "
        "the same layout); convert without --open-classes / --open-vocabulary / --live");
  }
  std::unique_ptr<DistributedLearner> d(new DistributedLearner());
  d->model_ = model;
  d->session_ = session;
  LearnerOptions lo = options;
  lo.seed = options.seed + static_cast<uint64_t>(session->rank());
  auto l = Learner::Create(model, lo);
  if (!l.ok()) return l.status();
  d->learner_ = std::move(l).value();
  if (d->learner_->engine() == Engine::kEp || d->learner_->engine() == Engine::kAdf) {
    return Status::InvalidArgument(std::string("engine '") + EngineName(d->learner_->engine()) +
                                   "' cannot learn on several ranks (EP keeps a site per document and ADF has no "
                                   "damped step to compose); use sdem or sep");
  }
  return d;
}

Status DistributedLearner::Round(const trib_document* docs, size_t n, uint64_t* total,
                                 const std::function<void(const Status&)>& on_bad, const Status& failed) {
  const int R = session_->size();
  const int me = session_->rank();
  // 1. Where this rank's documents start, and whether anyone has any.
  // (A rank that failed before the round counts one more document, so that
  // the round happens and every rank hears of the failure.)
  uint64_t mine = n + (failed.ok() ? 0 : 1), before = 0, sum = 0;
  const double t_wait = Now();
  TRIB_MPI(MPI_Exscan(&mine, &before, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Exscan");
  if (me == 0) before = 0;  // MPI_Exscan leaves rank 0's result undefined
  TRIB_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  stats_.wait_seconds += Now() - t_wait;
  *total = sum;
  if (sum == 0) return Status::OK();
  // 2. This rank's shard, from the round's statistics.
  const uint64_t t0 = model_->learner_state().updates;
  base_ = model_->stats();
  const size_t nb = base_.blocks().size();
  trace_.Reset(nb);
  learner_->set_trace(&trace_);
  model_->learner_state().updates = t0 + before;
  Status local = failed;
  std::vector<Status> refused;
  for (size_t i = 0; i < n && local.ok(); ++i) {
    Status st = learner_->Learn(docs[i]);
    if (!st.ok()) {
      if (on_bad && DocumentRefused(st)) {
        refused.push_back(st);
        continue;
      }
      local = st;
      break;
    }
  }
  learner_->set_trace(nullptr);
  auto restore = [&]() {
    model_->stats().raw() = base_.raw();  // (values only: the write tracking stays; Rebuild notes it)
    model_->stats().mutable_blocks() = base_.blocks();
    model_->learner_state().updates = t0;
    return model_->Rebuild(trib_step{0.0, model_->learner_state().effective_size, 0.0, t0});
  };
  Status agreed;
  if (session_->AnyFailed(local, &agreed)) {
    Status rb = restore();
    if (!rb.ok()) return Status::Internal(agreed.ToString() + "; restoring the model failed too: " + rb.ToString());
    return agreed;
  }
  for (const auto& st : refused) on_bad(st);
  // 3. Every rank's block maps: [steps, gradient, refused, decay[nb], offset[nb]].
  const size_t width = 3 + 2 * nb;
  packed_.assign(width, 0.0);
  packed_[0] = static_cast<double>(trace_.steps);
  packed_[1] = trace_.gradient ? 1.0 : 0.0;
  packed_[2] = static_cast<double>(refused.size());
  std::copy(trace_.decay.begin(), trace_.decay.end(), packed_.begin() + 3);
  std::copy(trace_.offset.begin(), trace_.offset.end(), packed_.begin() + 3 + static_cast<std::ptrdiff_t>(nb));
  gathered_.assign(width * static_cast<size_t>(R), 0.0);
  TRIB_MPI(MPI_Allgather(packed_.data(), static_cast<int>(width), MPI_DOUBLE, gathered_.data(), static_cast<int>(width),
                         MPI_DOUBLE, MPI_COMM_WORLD),
           "MPI_Allgather");
  std::vector<BlockTrace> traces(static_cast<size_t>(R));
  std::vector<const BlockTrace*> ptrs;
  uint64_t refused_total = 0;
  for (int r = 0; r < R; ++r) {
    const double* p = gathered_.data() + width * static_cast<size_t>(r);
    BlockTrace& t = traces[static_cast<size_t>(r)];
    t.steps = static_cast<uint64_t>(p[0]);
    t.gradient = p[1] != 0.0;
    refused_total += static_cast<uint64_t>(p[2]);
    t.decay.assign(p + 3, p + 3 + nb);
    t.offset.assign(p + 3 + nb, p + 3 + 2 * nb);
    ptrs.push_back(&t);
  }
  plan_.Plan(base_.blocks(), ptrs);
  // 4. The sum of the contributions, then the composed statistics.
  const uint64_t P = base_.size();
  acc_.assign(P, 0.0);
  plan_.AddContribution(static_cast<uint32_t>(me), base_, model_->stats(), 0, P, acc_.data());
  const double t_reduce = Now();
  for (size_t off = 0; off < P; off += kMaxCount) {
    const int count = static_cast<int>(std::min<uint64_t>(kMaxCount, P - off));
    TRIB_MPI(MPI_Allreduce(MPI_IN_PLACE, acc_.data() + off, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
             "MPI_Allreduce");
  }
  stats_.allreduce_seconds += Now() - t_reduce;
  stats_.allreduce_bytes += P * sizeof(double);
  plan_.Finish(base_, acc_.data(), 0, P, model_->stats().raw().data());
  std::copy(plan_.blocks().begin(), plan_.blocks().end(), model_->stats().mutable_blocks().begin());
  LearnerState& ls = model_->learner_state();
  ls.updates = t0 + sum - refused_total;
  Status rb = model_->Rebuild(trib_step{0.0, ls.effective_size, 0.0, ls.updates});
  // A rank whose rebuild fails fails the next round's agreement too; say it now.
  Status after;
  if (session_->AnyFailed(rb, &after)) {
    Status rs = restore();
    if (!rs.ok()) return Status::Internal(after.ToString() + "; restoring the model failed too: " + rs.ToString());
    return after;
  }
  ++stats_.rounds;
  stats_.documents += sum - refused_total;
  return Status::OK();
}

}  // namespace tributary
