// Private to the server: predictions kept for a label that comes later
// (issue 42, late labels; docs/http-api.md "Late labels"). A predict request
// with "keep" stores each document with its prediction under an id; POST
// /v1/feedback takes them back, labelled, into an ordinary learn record
// (WalRecord.prediction says which one), and the learner counts the
// prediction made at the time in the delayed quality figures.
//
// Durable in DIR/feedback/, a write-ahead log of its own (wal.h format):
// a kept record (document + KeptPrediction) per document, synced before the
// predict answer; a "labelled" mark (KeptPrediction.labelled, the label in
// the document) once the learner learned its label. Open reads it back: the
// kept ones not labelled yet wait again; the labelled ones are counted
// again in the delayed figures (the `counted` callback), so those figures
// cover every label of the predictions the log still holds, across restarts.
//
// Bounded: kept documents older than max_age_s, or the oldest while their
// bytes exceed max_bytes, expire (a later label for them: kExpired); the
// log's segments that hold only expired or labelled records are deleted.
// Ids are "k<sequence>": an id never issued is kUnknown, not kExpired.
//
// Thread safety: every method takes the store's mutex (I/O threads keep and
// take; the learner marks labels). Keep fsyncs under it: keeping predictions
// is serialised (no group commit yet).
#ifndef TRIBUTARY_STREAMS_SRC_SERVER_FEEDBACK_H_
#define TRIBUTARY_STREAMS_SRC_SERVER_FEEDBACK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tributary/env.h"
#include "tributary/status.h"
#include "tributary/v1/tributary.pb.h"
#include "tributary/wal.h"

namespace tributary {

class FeedbackStore {
 public:
  struct Options {
    uint64_t max_bytes = 256u << 20;     // kept documents' bytes (serialised)
    uint32_t max_age_s = 7 * 24 * 3600;  // a kept document expires after this long
    uint64_t segment_bytes = 16u << 20;  // the log's segments
    CorruptionPolicy on_corruption = CorruptionPolicy::kRefuse;
    Env* env = nullptr;
  };
  // Opens (creating) the log in `dir` and reads it back; `counted(kept
  // prediction, label)` is called for every labelled one, in log order.
  static Result<std::unique_ptr<FeedbackStore>> Open(
      const std::string& dir, const Options& options,
      const std::function<void(const v1::KeptPrediction&, const std::string&)>& counted);
  ~FeedbackStore();

  // Keeps each document with its prediction: assigns prediction_id (and
  // time_ms), logs and syncs them all. Errors: the log's (nothing kept).
  Status Keep(std::vector<v1::WalRecord>* kept);

  enum class Lookup { kFound, kUnknown, kExpired, kLabelled, kBeingLabelled, kMalformed };
  // Takes the kept document `id` for its label: kFound fills *doc and *pred
  // and marks it as being labelled (a second Take answers kBeingLabelled)
  // until Labelled or Release.
  Lookup Take(const std::string& id, v1::Document* doc, v1::KeptPrediction* pred);
  // A taken id whose label was not logged (refused, log failure): kept again.
  void Release(const std::string& id);
  // The learner learned a label for `pred` (a record's WalRecord.prediction):
  // true when it is counted now (its mark written; false when it was
  // already, e.g. on replay after a restart that read the mark).
  // The mark is appended, durable at the next Sync (the learner calls it
  // after each batch, before a snapshot can cover the learn record).
  bool Labelled(const v1::KeptPrediction& pred, const std::string& label);
  // Makes the marks appended since the last call durable.
  Status Sync();

  struct Stats {
    uint64_t waiting = 0;   // kept, no label yet
    uint64_t bytes = 0;     // their bytes
    uint64_t kept = 0;      // kept since start
    uint64_t labelled = 0;  // labels learned since start
    uint64_t expired = 0;   // expired since start
    uint64_t refused = 0;   // Take that found no document (unknown, expired, labelled)
    std::string error;      // the log's last error (marks that could not be written)
  };
  Stats stats() const;

 private:
  FeedbackStore() = default;
  struct Entry {
    v1::Document document;
    v1::KeptPrediction prediction;
    uint64_t bytes = 0;
    bool taken = false;
  };
  void ExpireLocked(int64_t now_ms);
  static bool ParseId(const std::string& id, uint64_t* sequence);

  mutable std::mutex mu_;
  Options options_;
  std::unique_ptr<WriteAheadLog> log_;
  uint64_t next_sequence_ = 1;
  uint64_t dropped_through_ = 0;          // DropCovered done up to here
  bool unsynced_ = false;                 // marks appended since the last Sync
  std::map<uint64_t, Entry> waiting_;     // by sequence (= id)
  std::map<uint64_t, int64_t> labelled_;  // sequence -> time kept (for 409, bounded like waiting_)
  Stats stats_;
};

}  // namespace tributary

#endif  // TRIBUTARY_STREAMS_SRC_SERVER_FEEDBACK_H_
