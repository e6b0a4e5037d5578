// `serve --source`: the reader threads and the broker adapters
// (source_reader.h says how learning from a broker is exactly once).
#include "server/source_reader.h"

#include "server/server_impl.h"  // before any other Asio include: it configures Asio for TSan builds

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <unordered_set>
#include <utility>

#include "tributary/kafka_source.h"
#include "tributary/redis_source.h"

namespace tributary {

namespace {

// Appends what an adapter read: the broker's position, and the document or
// why the entry is not one; `native` indexes the adapter's own batch.
void AddEntry(v1::SourcePosition position, v1::Document* doc, const Status& error, size_t native,
              std::vector<BrokerEntry>* out) {
  BrokerEntry e;
  e.position = std::move(position);
  e.doc = std::move(*doc);
  e.error = error;
  e.native = native;
  out->push_back(std::move(e));
}

using PartitionOffsets = std::map<std::pair<std::string, int32_t>, int64_t>;

// Raises the partition's offset in `m` to p's (inserting it if absent).
void KeepHighest(const v1::SourcePosition& p, PartitionOffsets* m) {
  auto& o = m->try_emplace({p.topic(), p.partition()}, p.offset()).first->second;
  o = std::max(o, p.offset());
}

// ---- Redis Streams (tributary/redis_source.h) -------------------------------------

class RedisAdapter : public BrokerAdapter {
 public:
  explicit RedisAdapter(RedisSourceOptions o) : options_(std::move(o)) {
    key_ = "redis://" + HostPort() + "/" + options_.stream + "?group=" + options_.group;
  }
  const std::string& key() const override { return key_; }
  bool connected() const override { return source_ != nullptr; }

  Status Connect() override {
    source_.reset();
    auto s = RedisSource::Connect(options_);
    if (!s.ok()) return s.status();
    source_ = std::move(s).value();
    if (!pruned_) {
      // Of the ids the log holds, only those still pending in the group can
      // be delivered again: keep those (bounded by the group's pending list,
      // not by the log).
      auto pending = source_->PendingIds(kMaxPendingKept);
      if (!pending.ok()) {
        source_.reset();
        return pending.status();
      }
      std::unordered_set<std::string> keep;
      for (const auto& id : *pending) {
        if (logged_.count(id) != 0) keep.insert(id);
      }
      logged_.swap(keep);
      pruned_ = true;
    }
    return Status::OK();
  }

  Status Read(std::vector<BrokerEntry>* out) override {
    out->clear();
    batch_.clear();
    Status st = source_->Read(&batch_);
    if (!st.ok()) {
      source_.reset();
      return st;
    }
    out->reserve(batch_.size());
    for (size_t i = 0; i < batch_.size(); ++i) {
      v1::SourcePosition p;
      p.set_source(key_);
      p.set_entry_id(batch_[i].entry_id);
      AddEntry(std::move(p), &batch_[i].doc, batch_[i].error, i, out);
    }
    return Status::OK();
  }

  Status Commit(const std::vector<v1::SourcePosition>& logged) override {
    std::vector<std::string> ids;
    ids.reserve(logged.size());
    for (const auto& p : logged) ids.push_back(p.entry_id());
    Status st = source_->Ack(ids);
    if (!st.ok()) source_.reset();
    return st;
  }

  Status Reject(const BrokerEntry& bad) override {
    SourceEntry& e = batch_.at(bad.native);
    e.error = bad.error;
    if (e.fields.empty()) e.fields.emplace_back("doc", bad.doc.SerializeAsString());
    Status st = source_->DeadLetter(e);
    if (!st.ok()) source_.reset();
    return st;
  }

  void Recovered(const v1::SourcePosition& p) override { logged_.insert(p.entry_id()); }
  bool Logged(const v1::SourcePosition& p) const override { return logged_.count(p.entry_id()) != 0; }
  void Remember(const v1::SourcePosition& p) override { logged_.insert(p.entry_id()); }
  void Forget(const std::vector<v1::SourcePosition>& committed) override {
    for (const auto& p : committed) logged_.erase(p.entry_id());
  }

  Status Lag(uint64_t* pending, int64_t* lag) override {
    auto l = source_->Lag();
    if (!l.ok()) {
      if (l.status().code() == Status::Code::kIOError) source_.reset();
      return l.status();
    }
    *pending = l->pending;
    *lag = l->lag;
    return Status::OK();
  }

 private:
  static constexpr size_t kMaxPendingKept = 1000000;
  std::string HostPort() const {
    const std::string h = options_.host.find(':') != std::string::npos ? "[" + options_.host + "]" : options_.host;
    return h + ":" + std::to_string(options_.port);
  }
  RedisSourceOptions options_;
  std::string key_;
  std::unique_ptr<RedisSource> source_;
  std::vector<SourceEntry> batch_;
  std::unordered_set<std::string> logged_;  // entry ids in the log, not known to be acknowledged
  bool pruned_ = false;
};

// ---- Kafka (tributary/kafka_source.h) --------------------------------------------

// Within a partition offsets are delivered in order, and the reader logs
// them in that order, so "in the log" is "at or below the highest offset
// logged" for the partition: one number per partition, not a set.
class KafkaAdapter : public BrokerAdapter {
 public:
  explicit KafkaAdapter(KafkaSourceOptions o) : options_(std::move(o)) {
    std::string brokers;
    for (const auto& b : options_.brokers) brokers += (brokers.empty() ? "" : ",") + b;
    key_ = "kafka://" + brokers + "/" + options_.topic + "?group=" + options_.group;
    // A partition assigned to this consumer starts after what the log
    // holds of it, when the log is ahead of the group's committed offset
    // (a crash between the fsync and the commit).
    options_.start_offset = [this](const std::string& topic, int32_t partition,
                                   std::optional<int64_t> committed) -> Result<std::optional<int64_t>> {
      auto it = logged_.find({topic, partition});
      // Past the log when the group went further (another member learned
      // those into its own model): start at the group's offset then.
      if (it == logged_.end() || (committed && *committed > it->second)) return std::optional<int64_t>();
      return std::optional<int64_t>(it->second + 1);
    };
    // Before partitions are given up, commit what is logged of them (the
    // reader commits after each batch; this covers a commit that failed).
    options_.on_revoke = [this](const std::vector<KafkaPartition>& parts) {
      std::vector<KafkaPosition> next;
      for (const auto& p : parts) {
        auto it = uncommitted_.find({p.topic, p.partition});
        if (it != uncommitted_.end()) next.push_back({p.topic, p.partition, it->second + 1});
      }
      if (!next.empty() && source_ && source_->Commit(next).ok()) {
        for (const auto& n : next) uncommitted_.erase({n.topic, n.partition});
      }
    };
  }
  // Leaves the group while the members on_revoke uses are alive.
  ~KafkaAdapter() override {
    if (source_) (void)source_->Close();
  }
  const std::string& key() const override { return key_; }
  bool connected() const override { return source_ != nullptr; }

  Status Connect() override {
    if (source_) (void)source_->Close();  // leaves the group; on_revoke commits what it can
    source_.reset();
    auto s = KafkaSource::Connect(options_);
    if (!s.ok()) return s.status();
    source_ = std::move(s).value();
    return Status::OK();
  }

  Status Read(std::vector<BrokerEntry>* out) override {
    out->clear();
    batch_.clear();
    Status st = source_->Read(&batch_);
    if (!st.ok()) {
      // All brokers down (IOError) or the topic missing (NotFound): the
      // consumer reconnects by itself. A fatal error: connect again.
      if (st.code() != Status::Code::kIOError && st.code() != Status::Code::kNotFound) source_.reset();
      return st;
    }
    out->reserve(batch_.size());
    for (size_t i = 0; i < batch_.size(); ++i) {
      v1::SourcePosition p;
      p.set_source(key_);
      p.set_topic(batch_[i].topic);
      p.set_partition(batch_[i].partition);
      p.set_offset(batch_[i].offset);
      AddEntry(std::move(p), &batch_[i].doc, batch_[i].error, i, out);
    }
    return Status::OK();
  }

  Status Commit(const std::vector<v1::SourcePosition>& logged) override {
    PartitionOffsets last;
    for (const auto& p : logged) KeepHighest(p, &last);
    std::vector<KafkaPosition> next;
    for (const auto& [tp, offset] : last) next.push_back({tp.first, tp.second, offset + 1});
    Status st = source_->Commit(next);
    // A partition revoked meanwhile (NotFound) is committed by no one: its
    // new owner starts at the group's offset; if that is this server again,
    // start_offset skips what the log holds.
    if (st.ok() || st.code() == Status::Code::kNotFound) {
      for (const auto& n : next) uncommitted_.erase({n.topic, n.partition});
      return Status::OK();
    }
    return st;
  }

  Status Reject(const BrokerEntry& bad) override {
    KafkaEntry& e = batch_.at(bad.native);
    e.error = bad.error;
    if (!e.value) e.value = bad.doc.SerializeAsString();
    return source_->DeadLetter(e);  // committed past with the batch
  }

  void Recovered(const v1::SourcePosition& p) override { Remember(p); }
  bool Logged(const v1::SourcePosition& p) const override {
    auto it = logged_.find({p.topic(), p.partition()});
    return it != logged_.end() && p.offset() <= it->second;
  }
  void Remember(const v1::SourcePosition& p) override {
    KeepHighest(p, &logged_);
    KeepHighest(p, &uncommitted_);
  }
  void Forget(const std::vector<v1::SourcePosition>&) override {}  // Commit does it

  Status Lag(uint64_t* pending, int64_t* lag) override {
    auto l = source_->Lag();
    if (!l.ok()) return l.status();
    *pending = 0;                      // Kafka keeps no per-message pending list: the lag says it all
    *lag = l->joined ? l->total : -1;  // not known before the group's first assignment
    return Status::OK();
  }

 private:
  KafkaSourceOptions options_;
  std::string key_;
  std::unique_ptr<KafkaSource> source_;
  std::vector<KafkaEntry> batch_;
  PartitionOffsets logged_;       // highest offset in the log
  PartitionOffsets uncommitted_;  // logged, commit not yet done
};

// The URL without a password (user:password@ or :password@).
std::string WithoutPassword(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t start = scheme + 3;
  const size_t slash = url.find('/', start);
  const size_t at = url.rfind('@', slash == std::string::npos ? url.size() : slash);
  if (at == std::string::npos || at < start) return url;
  return url.substr(0, start) + url.substr(at + 1);
}

}  // namespace

Result<std::unique_ptr<BrokerAdapter>> MakeBrokerAdapter(const std::string& url) {
  if (url.rfind("redis://", 0) == 0) {
    auto o = ParseRedisSourceUrl(url);
    if (!o.ok()) return o.status().WithContext("--source");
    return std::unique_ptr<BrokerAdapter>(new RedisAdapter(std::move(o).value()));
  }
  if (url.rfind("kafka://", 0) == 0) {
    auto o = ParseKafkaSourceUrl(url);
    if (!o.ok()) return o.status().WithContext("--source");
    return std::unique_ptr<BrokerAdapter>(new KafkaAdapter(std::move(o).value()));
  }
  const size_t scheme = url.find("://");
  return Status::InvalidArgument(
      "--source '" + WithoutPassword(url) + "': expected a URL starting with redis:// or kafka://, found " +
      (scheme == std::string::npos ? std::string("no scheme") : "'" + url.substr(0, scheme + 3) + "'"));
}

// ---- The reader thread ------------------------------------------------------------

SourceReader::SourceReader(Server::Impl* server, std::unique_ptr<BrokerAdapter> adapter, std::string url)
    : srv_(server), adapter_(std::move(adapter)), name_(WithoutPassword(url)) {}

SourceReader::~SourceReader() { Stop(); }

void SourceReader::Start() {
  thread_ = std::thread([this] { Run(); });
}

void SourceReader::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool SourceReader::Pause(uint32_t ms) {
  std::unique_lock<std::mutex> l(mu_);
  return !cv_.wait_for(l, std::chrono::milliseconds(ms), [&] { return stop_; });
}

void SourceReader::NoteError(const Status& st) {
  errors_++;
  std::lock_guard<std::mutex> l(mu_);
  last_error_ = st.ToString();
}

bool SourceReader::Submit(std::vector<v1::Document> docs, const std::vector<v1::SourcePosition>& positions) {
  const uint64_t n = docs.size();
  // Learning must be possible: not recovering, not draining, the log working.
  // Otherwise hold the batch (nothing is acknowledged to the broker).
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return false;
    }
    if (srv_->draining) return false;
    if (srv_->recovery_phase.load() == RecoveryPhase::kReady && srv_->learning_enabled) break;
    if (!Pause(100)) return false;
  }
  // Room in the queue: wait for the learner to free some (backpressure).
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      room_ = false;
    }
    if (srv_->TryReserve(n, [this] {
          std::lock_guard<std::mutex> l(mu_);
          room_ = true;
          cv_.notify_all();
        })) {
      break;
    }
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return stop_ || room_; });
    if (stop_) return false;  // the registered retry only sets room_ later
  }
  LearnJob job;
  job.docs = std::move(docs);
  job.positions = positions;
  job.start = Clock::now();
  {
    std::lock_guard<std::mutex> l(mu_);
    answer_.reset();
  }
  job.complete = [this](v1::Response r) {
    std::lock_guard<std::mutex> l(mu_);
    answer_ = std::move(r);
    cv_.notify_all();
  };
  if (!srv_->SubmitLearn(job)) {
    srv_->ReleaseCapacity(n);
    return false;
  }
  // The committer answers every job it was given, also while stopping.
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return answer_.has_value(); });
  if (answer_->code() == v1::Response::OK) return true;
  last_error_ = answer_->message();
  errors_++;
  return false;
}

namespace {
// Positions read and logged but not acknowledged (the broker refuses) past
// which the reader stops reading until the broker takes them (memory: ~100
// bytes each).
constexpr size_t kMaxUnacked = 100000;
}  // namespace

void SourceReader::Run() {
  srv_->BindReader(&reader_);  // this thread's reader of the model (Server::Impl::Read)
  uint32_t backoff_ms = 100;
  uint32_t commit_backoff_ms = 100;
  auto commit_after = Clock::now();  // a refused acknowledgement is retried no earlier
  auto last_lag = Clock::now() - std::chrono::hours(1);
  std::vector<BrokerEntry> entries;
  // Positions logged but not yet acknowledged to the broker (it was
  // unreachable): acknowledged first after reconnecting.
  std::vector<v1::SourcePosition> unacked;
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
    }
    if (!adapter_->connected()) {
      connected_ = false;
      Status st = adapter_->Connect();
      if (!st.ok()) {
        NoteError(st);
        if (!Pause(backoff_ms)) return;
        backoff_ms = std::min<uint32_t>(backoff_ms * 2, 5000);
        continue;
      }
      reconnects_++;
      connected_ = true;
      backoff_ms = 100;
    }
    // Sampled before the retry of refused acknowledgements below, so that
    // the gauges stay current while a broker refuses them.
    if (Clock::now() - last_lag >= std::chrono::seconds(1)) {
      uint64_t pending = 0;
      int64_t lag = -1;
      if (adapter_->Lag(&pending, &lag).ok()) {
        pending_ = pending;
        lag_ = lag;
      }
      last_lag = Clock::now();
      if (!adapter_->connected()) continue;
    }
    // Acknowledgements the broker refused are retried with a growing pause
    // (not in a tight loop against a broker that refuses, or a group that
    // rebalances), while reading goes on: what was read is in the log, so a
    // refused acknowledgement only leaves the group's offset behind. Past
    // kMaxUnacked positions waiting, reading waits too.
    if (!unacked.empty() && Clock::now() >= commit_after) {
      Status st = adapter_->Commit(unacked);
      if (st.ok()) {
        adapter_->Forget(unacked);
        unacked.clear();
        commit_backoff_ms = 100;
      } else {
        NoteError(st);
        commit_after = Clock::now() + std::chrono::milliseconds(commit_backoff_ms);
        commit_backoff_ms = std::min<uint32_t>(commit_backoff_ms * 2, 5000);
      }
    }
    if (unacked.size() >= kMaxUnacked) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(commit_after - Clock::now()).count();
      if (!Pause(static_cast<uint32_t>(std::clamp<int64_t>(wait, 1, 5000)))) return;
      continue;
    }
    Status st = adapter_->Read(&entries);
    if (!st.ok()) {
      NoteError(st);
      if (!Pause(backoff_ms)) return;
      continue;
    }
    if (entries.empty()) continue;
    read_ += entries.size();
    // Sort the batch: already logged (acknowledge only), bad (dead-letter),
    // good (learn). A good document is checked by the rule every learn
    // request goes through, against the published model.
    std::vector<v1::SourcePosition> done;  // acknowledge without learning
    std::vector<v1::Document> docs;
    std::vector<v1::SourcePosition> positions;
    // The checks first, against one publication (not held across the
    // broker calls below).
    Status read = srv_->Read([&](const LiveView& pub) {
      const std::string label_required_by = LabelRequiredBy(pub.model->loss_plugin().get());
      DocumentBuffer buf;
      for (auto& e : entries) {
        if (!e.error.ok() || adapter_->Logged(e.position)) continue;
        std::string new_class;
        Status check = pub.decoder->DecodeForLearning(e.doc, read_.load(), pub.model->schema(), label_required_by, &buf,
                                                      &new_class);
        if (!check.ok()) {
          e.error = Status::InvalidDocument(name_ + " entry " +
                                            (e.position.entry_id().empty()
                                                 ? e.position.topic() + "/" + std::to_string(e.position.partition()) +
                                                       "@" + std::to_string(e.position.offset())
                                                 : e.position.entry_id()) +
                                            ": " + check.message());
        }
      }
      return Status::OK();
    });
    if (!read.ok()) {  // (no reader: nothing of the batch is acknowledged; delivered again)
      NoteError(read);
      if (!Pause(backoff_ms)) return;
      if (Status c = adapter_->Connect(); !c.ok()) NoteError(c);  // (the next read tries again)
      continue;
    }
    bool lost = false;
    for (auto& e : entries) {
      if (adapter_->Logged(e.position)) {
        duplicates_++;
        done.push_back(e.position);
        continue;
      }
      if (!e.error.ok()) {
        Status rj = adapter_->Reject(e);
        if (!rj.ok()) {  // delivered again after reconnecting
          NoteError(rj);
          lost = true;
          break;
        }
        dead_lettered_++;
        done.push_back(e.position);  // acknowledged (Kafka: committed past) with the batch
        {
          std::lock_guard<std::mutex> l(mu_);
          last_error_ = e.error.ToString();
        }
        continue;
      }
      docs.push_back(std::move(e.doc));
      positions.push_back(e.position);
    }
    if (lost) continue;  // the adapter dropped its connection: start over
    if (!docs.empty()) {
      const size_t n = docs.size();
      if (!Submit(std::move(docs), positions)) {
        // Not logged (stopping, or the log failed): nothing of the batch is
        // acknowledged; reconnecting makes the broker deliver it again.
        {
          std::lock_guard<std::mutex> l(mu_);
          if (stop_) return;
        }
        if (srv_->draining) {
          Pause(100);
          continue;
        }
        Pause(backoff_ms);
        if (Status c = adapter_->Connect(); !c.ok()) NoteError(c);
        continue;
      }
      logged_ += n;
      for (const auto& p : positions) adapter_->Remember(p);
      done.insert(done.end(), positions.begin(), positions.end());
    }
    if (!unacked.empty()) {
      // Behind refused ones: acknowledged together, in order, once their
      // pause is over (a later offset committed first would be undone by
      // the earlier one).
      unacked.insert(unacked.end(), done.begin(), done.end());
      continue;
    }
    Status ack = adapter_->Commit(done);
    if (ack.ok()) {
      adapter_->Forget(done);
    } else {
      NoteError(ack);
      unacked.insert(unacked.end(), done.begin(), done.end());
      commit_after = Clock::now() + std::chrono::milliseconds(commit_backoff_ms);
      commit_backoff_ms = std::min<uint32_t>(commit_backoff_ms * 2, 5000);
    }
  }
}

std::string SourceReader::LastError() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_error_;
}

void SourceReader::WriteMetrics(std::ostream& os, const std::vector<std::unique_ptr<SourceReader>>& readers) {
  if (readers.empty()) return;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    for (const auto& r : readers) {
      os << name << "{source=\"" << server_internal::PrometheusLabel(r->name_) << "\"} " << value(*r) << "\n";
    }
  };
  os << "# HELP tributary_source_entries_total Entries read from a broker source (--source), by outcome: read; "
        "logged (learned through the write-ahead log, then acknowledged to the broker); duplicate (delivered "
        "again but already in the log: acknowledged, not learned again); dead_lettered (not a document the "
        "model can learn: acknowledged, and copied to the dead-letter stream if the source has one).\n"
        "# TYPE tributary_source_entries_total counter\n";
  for (const auto& r : readers) {
    const std::string l =
        "tributary_source_entries_total{source=\"" + server_internal::PrometheusLabel(r->name_) + "\",outcome=\"";
    os << l << "read\"} " << r->read_ << "\n";
    os << l << "logged\"} " << r->logged_ << "\n";
    os << l << "duplicate\"} " << r->duplicates_ << "\n";
    os << l << "dead_lettered\"} " << r->dead_lettered_ << "\n";
  }
  family("tributary_source_errors_total", "counter",
         "Broker errors of a source (unreachable, refused, a batch not logged); the reader retries.",
         [](const SourceReader& r) { return r.errors_.load(); });
  family("tributary_source_connects_total", "counter", "Connections made to a source's broker.",
         [](const SourceReader& r) { return r.reconnects_.load(); });
  family("tributary_source_connected", "gauge", "1 while a source's broker is connected.",
         [](const SourceReader& r) { return r.connected_ ? 1 : 0; });
  family("tributary_source_pending", "gauge",
         "Entries delivered to the source's consumer group and not yet acknowledged (sampled every second).",
         [](const SourceReader& r) { return r.pending_.load(); });
  family("tributary_source_lag", "gauge",
         "Entries of the source not yet delivered to its group (-1: the broker cannot tell; sampled every second).",
         [](const SourceReader& r) { return r.lag_.load(); });
}

}  // namespace tributary
