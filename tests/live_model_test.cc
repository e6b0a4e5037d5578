// LiveModel (live_model.h): learning and predicting at once on one handle.
// The central test runs a learner thread and two reader threads for about two
// seconds and then replays the stream offline: every prediction must equal
// the offline model's at the version it names, bit for bit. Run under
// ThreadSanitizer in CI (.ci/run's TSan build runs this binary).
#include "tributary/live_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "test_util.h"
#include "tributary/input_document.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/model_config.h"

namespace tributary {
namespace {

constexpr uint32_t kTerms = 400, kClasses = 4;

ModelSchema Schema() {
  auto s = ModelSchema::FromProto(testing::TextSchema(kTerms, kClasses));
  EXPECT_TRUE(s.ok());
  return std::move(s).value();
}

std::unique_ptr<Model> NewModel(const std::string& loss = "ncll") {
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss(loss), Schema(), {}, 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = 1000;
  return std::move(m).value();
}

// Class k prefers terms [k * 100, k * 100 + 100).
std::vector<DocumentBuffer> Stream(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<DocumentBuffer> docs;
  for (size_t i = 0; i < n; ++i) {
    const int64_t y = static_cast<int64_t>(rng() % kClasses);
    std::vector<std::pair<uint32_t, double>> terms;
    for (int j = 0; j < 3 + static_cast<int>(rng() % 8); ++j) {
      const uint32_t t =
          rng() % 4 != 0 ? static_cast<uint32_t>(y * 100 + rng() % 100) : static_cast<uint32_t>(rng() % kTerms);
      terms.emplace_back(t, static_cast<double>(1 + rng() % 3));
    }
    docs.push_back(testing::MakeDoc(i, y, terms));
    docs.back().Canonicalize();
  }
  return docs;
}

// The offline reference: the same stream learned by a plain Learner, scored
// by the model at each step (a prediction of the live handle at version v
// must equal Score() after v calls of Learn(), bit for bit).
struct Offline {
  std::unique_ptr<Model> model = NewModel();
  Result<std::unique_ptr<Learner>> learner = Learner::Create(model.get(), {});
  Result<std::unique_ptr<ScoringState>> state = model->NewScoringState();
  std::vector<double> scores = std::vector<double>(kClasses);
  bool ok() const { return learner.ok() && state.ok(); }
  bool Learn(const DocumentBuffer& d) { return (*learner)->Learn(d.View()).ok(); }
  const std::vector<double>& Score(const DocumentBuffer& d) {
    EXPECT_TRUE(model->Score(d.View(), state->get(), scores.data()).ok());
    return scores;
  }
};

struct Record {
  uint64_t version;
  uint32_t doc;
  std::vector<double> scores;
};

// A learner thread and two readers at once for about two seconds; then the
// offline replay: each recorded prediction equals the offline model's at its
// version, versions never go back for one reader, and the readers saw many
// versions (they did not just read the first one).
TEST(LiveModelTest, EveryPredictionIsTheOfflineModelsAtItsVersion) {
  const std::vector<DocumentBuffer> docs = Stream(2000, 5);
  LiveModelOptions opt;
  opt.publish_every = 7;
  auto live = LiveModel::Create(NewModel(), opt);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  std::atomic<bool> done{false};
  std::atomic<uint64_t> learned{0};
  std::vector<std::vector<Record>> records(2);
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      auto reader = (*live)->NewReader();
      ASSERT_TRUE(reader.ok()) << reader.status().ToString();
      std::mt19937_64 rng(100 + r);
      LivePrediction p;
      uint64_t last = 0, n = 0;
      while (!done.load()) {
        const uint32_t i = static_cast<uint32_t>(rng() % docs.size());
        ASSERT_TRUE((*reader)->Predict(docs[i].View(), &p).ok());
        ASSERT_GE(p.version, last);
        // version() from any thread while the writer publishes (and
        // refreshes retired copies in place): never behind what was read.
        ASSERT_GE((*live)->version(), p.version);
        last = p.version;
        if (++n % 13 == 0 && records[r].size() < 20000) records[r].push_back({p.version, i, p.scores});
      }
    });
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  uint64_t steps = 0;
  while (std::chrono::steady_clock::now() < until && steps < 200000) {
    ASSERT_TRUE((*live)->Learn(docs[steps % docs.size()].View()).ok());
    ++steps;
  }
  learned = steps;
  done = true;
  for (auto& t : readers) t.join();
  ASSERT_GT(steps, 100u);
  EXPECT_EQ((*live)->version(), steps - steps % opt.publish_every);

  // Offline: the same stream learned by a plain Learner, checked at every
  // version a prediction names.
  std::multimap<uint64_t, const Record*> by_version;
  std::map<uint64_t, int> versions;
  for (const auto& rs : records) {
    for (const auto& r : rs) {
      by_version.emplace(r.version, &r);
      versions[r.version]++;
    }
  }
  ASSERT_GT(by_version.size(), 50u);
  EXPECT_GT(versions.size(), 5u) << "the readers saw " << versions.size() << " versions";
  Offline offline;
  ASSERT_TRUE(offline.ok());
  uint64_t checked = 0;
  for (uint64_t v = 0;; ++v) {
    auto [lo, hi] = by_version.equal_range(v);
    for (auto it = lo; it != hi; ++it) {
      ASSERT_EQ(v % opt.publish_every, 0u) << "a version that was never published";
      const std::vector<double>& scores = offline.Score(docs[it->second->doc]);
      ASSERT_EQ(std::memcmp(scores.data(), it->second->scores.data(), sizeof(double) * kClasses), 0)
          << "document " << it->second->doc << " at version " << v;
      ++checked;
    }
    if (v == steps) break;
    ASSERT_TRUE(offline.Learn(docs[v % docs.size()]));
  }
  EXPECT_EQ(checked, by_version.size());
  // Publications were refreshed in place (pages), not copied each time, and
  // the copies stay few.
  const LiveModel::Stats s = (*live)->stats();
  EXPECT_GT(s.refreshed, s.publications / 2) << s.publications;
  EXPECT_LE(s.copies, 6u);
}

// A snapshot taken while learning and predicting go on holds exactly the
// published model of the version it reports.
// Reader::Read holds one publication for a whole batch (the server scores a
// predict request, and checks a learn request, inside one Read): every score
// of a batch comes from the offline model at the one version the view names,
// while the learner publishes after every document. The learner here learns
// wire documents in the model's ids (Learn(v1::Document), as the server's log
// holds them), which must equal learning the decoded documents.
TEST(LiveModelTest, ReadHoldsOneVersionForABatch) {
  const std::vector<DocumentBuffer> docs = Stream(600, 9);
  const ModelSchema schema = Schema();
  std::vector<v1::Document> wire(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const trib_document d = docs[i].View();
    wire[i].set_label(schema.classes()[static_cast<size_t>(d.label)]);
    for (uint32_t j = 0; j < d.num_terms; ++j) {
      wire[i].add_term_ids(d.term_ids[j]);
      wire[i].add_term_counts(d.term_counts[j]);
    }
  }
  LiveModelOptions opt;
  opt.publish_every = 1;
  auto live = LiveModel::Create(NewModel(), opt);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  constexpr size_t kBatch = 64;
  struct Batch {
    uint64_t version;
    size_t first;
    std::vector<double> scores;  // kBatch x kClasses
  };
  std::vector<Batch> batches;
  std::atomic<bool> done{false};
  std::thread reader_thread([&] {
    auto reader = (*live)->NewReader();
    ASSERT_TRUE(reader.ok());
    size_t first = 0;
    while (!done.load() || batches.size() < 3) {
      Batch b;
      b.first = first;
      first = (first + 37) % (docs.size() - kBatch);
      Status st = (*reader)->Read([&](const LiveView& view) {
        b.version = view.version;
        b.scores.resize(kBatch * kClasses);
        for (size_t i = 0; i < kBatch; ++i) {
          TRIB_RETURN_IF_ERROR(view.model->Score(docs[b.first + i].View(), view.state, &b.scores[i * kClasses]));
          std::this_thread::yield();  // spread the batch over the learner's steps
        }
        return Status::OK();
      });
      ASSERT_TRUE(st.ok()) << st.ToString();
      if (batches.size() < 5000) batches.push_back(std::move(b));
    }
  });
  // About half a second of learning, the stream repeated.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  uint64_t steps = 0;
  while (std::chrono::steady_clock::now() < until && steps < 100000) {
    ASSERT_TRUE((*live)->Learn(wire[steps % docs.size()], steps).ok());
    ++steps;
  }
  done = true;
  reader_thread.join();
  EXPECT_EQ((*live)->version(), steps);
  // An error in the function is the Read's; a wire document the model cannot
  // take is named.
  auto reader = (*live)->NewReader();
  ASSERT_TRUE(reader.ok());
  Status refused = (*reader)->Read([](const LiveView&) { return Status::InvalidArgument("from fn"); });
  EXPECT_EQ(refused.message(), "from fn");
  v1::Document bad;
  bad.set_label(schema.classes()[0]);
  bad.add_term_ids(kTerms + 5);
  bad.add_term_counts(1);
  Status st = (*live)->Learn(bad, 77);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("77"), std::string::npos) << st.message();
  EXPECT_EQ((*live)->version(), steps) << "a refused document changed nothing";

  std::map<uint64_t, std::vector<const Batch*>> by_version;
  for (const auto& b : batches) by_version[b.version].push_back(&b);
  Offline offline;
  ASSERT_TRUE(offline.ok());
  for (uint64_t v = 0; v <= steps; ++v) {
    for (const Batch* b : by_version[v]) {
      for (size_t i = 0; i < kBatch; ++i) {
        const std::vector<double>& scores = offline.Score(docs[b->first + i]);
        ASSERT_EQ(std::memcmp(scores.data(), &b->scores[i * kClasses], sizeof(double) * kClasses), 0)
            << "batch at version " << v << ", its document " << i;
      }
    }
    if (v < steps) {
      ASSERT_TRUE(offline.Learn(docs[v % docs.size()]));
    }
  }
  // The live model learned the wire documents as the offline one learned the decoded ones.
  const std::string saved = testing::TempDir("live_read") + "/m.trib";
  ASSERT_TRUE((*live)->SaveSnapshot(saved).ok());
  auto back = Model::Load(saved, testing::BuiltinRegistry());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ((*back)->stats().size(), offline.model->stats().size());
  EXPECT_EQ(std::memcmp((*back)->stats().raw().data(), offline.model->stats().raw().data(),
                        offline.model->stats().size() * sizeof(double)),
            0);
}

TEST(LiveModelTest, SnapshotWhileServingIsThePublishedVersion) {
  const std::vector<DocumentBuffer> docs = Stream(600, 9);
  LiveModelOptions opt;
  opt.publish_every = 10;
  auto live = LiveModel::Create(NewModel(), opt);
  ASSERT_TRUE(live.ok());
  const std::string dir = testing::TempDir("live_snapshot");
  std::atomic<bool> done{false};
  std::thread learner([&] {
    for (size_t i = 0; i < docs.size(); ++i) ASSERT_TRUE((*live)->Learn(docs[i].View()).ok());
    done = true;
  });
  std::vector<std::pair<std::string, uint64_t>> saved;
  while (!done.load() || saved.empty()) {
    const std::string path = dir + "/s" + std::to_string(saved.size()) + ".trib";
    uint64_t version = 0;
    ASSERT_TRUE((*live)->SaveSnapshot(path, &version).ok());
    saved.emplace_back(path, version);
  }
  learner.join();
  ASSERT_FALSE(saved.empty());
  auto offline = NewModel();
  auto l = Learner::Create(offline.get(), {});
  ASSERT_TRUE(l.ok());
  uint64_t at = 0;
  for (const auto& [path, version] : saved) {
    while (at < version) ASSERT_TRUE((*l)->Learn(docs[at++].View()).ok());
    auto m = Model::Load(path, testing::BuiltinRegistry());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)->learner_state().updates, version);
    ASSERT_EQ((*m)->stats().size(), offline->stats().size());
    EXPECT_EQ(std::memcmp((*m)->stats().raw().data(), offline->stats().raw().data(),
                          offline->stats().size() * sizeof(double)),
              0)
        << path;
  }
}

// Restore replaces the model: readers move to it with their next prediction,
// and learning continues from it.
TEST(LiveModelTest, RestoreMovesReadersToTheNewModel) {
  const std::vector<DocumentBuffer> docs = Stream(300, 3);
  auto live = LiveModel::Create(NewModel(), {});
  ASSERT_TRUE(live.ok());
  auto reader = (*live)->NewReader();
  ASSERT_TRUE(reader.ok());
  for (const auto& d : docs) ASSERT_TRUE((*live)->Learn(d.View()).ok());
  ASSERT_TRUE((*live)->Publish().ok());
  LivePrediction before, after;
  ASSERT_TRUE((*reader)->Predict(docs[0].View(), &before).ok());
  EXPECT_EQ(before.version, docs.size());
  // Back to an untrained model: version 0, the prior's uniform scores.
  ASSERT_TRUE((*live)->Restore(NewModel()).ok());
  ASSERT_TRUE((*reader)->Predict(docs[0].View(), &after).ok());
  EXPECT_EQ(after.version, 0u);
  EXPECT_NE(before.scores, after.scores);
  for (uint32_t k = 1; k < kClasses; ++k) EXPECT_EQ(after.scores[k], after.scores[0]);
  ASSERT_TRUE((*live)->Learn(docs[0].View()).ok());
  ASSERT_TRUE((*live)->Publish().ok());
  ASSERT_TRUE((*reader)->Predict(docs[0].View(), &after).ok());
  EXPECT_EQ(after.version, 1u);
}

// Bad input: a document outside the schema is refused by the reader, naming
// it; a refused learn leaves the model unchanged; readers are bounded.
TEST(LiveModelTest, BadInputIsRefusedNamingIt) {
  LiveModelOptions opt;
  opt.max_readers = 2;
  auto live = LiveModel::Create(NewModel(), opt);
  ASSERT_TRUE(live.ok());
  auto r1 = (*live)->NewReader();
  auto r2 = (*live)->NewReader();
  ASSERT_TRUE(r1.ok() && r2.ok());
  auto r3 = (*live)->NewReader();
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("2 reader slots"), std::string::npos) << r3.status().ToString();
  r2->reset();  // a slot comes back
  EXPECT_TRUE((*live)->NewReader().ok());

  DocumentBuffer bad = testing::MakeDoc(7, 0, {{3, 1.0}, {kTerms + 5, 1.0}});
  bad.id = "doc-7";
  LivePrediction p;
  Status st = (*r1)->Predict(bad.View(), &p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("term id 405 is outside the vocabulary (400 terms)"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("doc-7"), std::string::npos) << st.ToString();

  DocumentBuffer bad_label = testing::MakeDoc(8, kClasses + 1, {{3, 1.0}});
  st = (*live)->Learn(bad_label.View());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("label index 5 >= number of classes 4"), std::string::npos) << st.ToString();
  ASSERT_TRUE((*live)->Publish().ok());
  EXPECT_EQ((*live)->version(), 0u);

  LiveModelOptions none;
  none.max_readers = 0;
  auto refused = LiveModel::Create(NewModel(), none);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("max_readers"), std::string::npos);
}

// Documents as a program holds them (input_document.h): text through the
// library tokenizer learns exactly what the same terms given by name learn;
// a model with an open vocabulary and open classes grows from them; readers
// predict from text and name the class.
TEST(LiveModelTest, LearnsAndPredictsFromText) {
  v1::Schema proto;
  proto.set_open_vocabulary(true);
  proto.set_open_classes(true);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  auto make = [&] {
    auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("nll"), *schema, {}, 1);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    (*m)->learner_state().effective_size = 100;
    return std::move(m).value();
  };
  auto a = LiveModel::Create(make(), {});
  auto b = LiveModel::Create(make(), {});
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"spam", "Win a FREE prize, win now!"},   {"ham", "Lunch at noon? The usual place."},
      {"spam", "free money: claim your prize"}, {"ham", "the meeting moved to noon"},
      {"spam", "WIN win win, free free"},       {"ham", "see you at lunch, usual time"}};
  InputDocument d;
  for (int pass = 0; pass < 5; ++pass) {
    for (const auto& [label, text] : texts) {
      d.Clear();
      d.SetId(label + "-" + std::to_string(pass)).AddText(text).SetLabel(label);
      ASSERT_TRUE((*a)->Learn(d).ok());
      // The same terms by name, counted by hand (the tokenizer: NFKC_Casefold
      // of runs of letters and digits).
      std::map<std::string, double> counts;
      std::string word;
      for (char c : text + " ") {
        if (std::isalnum(static_cast<unsigned char>(c))) {
          word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!word.empty()) {
          counts[word] += 1;
          word.clear();
        }
      }
      d.Clear();
      d.SetLabel(label);
      for (const auto& [w, n] : counts) d.AddTerm(w, n);
      ASSERT_TRUE((*b)->Learn(d).ok());
    }
  }
  ASSERT_TRUE((*a)->Publish().ok() && (*b)->Publish().ok());
  uint64_t terms_a = 0, terms_b = 0;
  std::vector<double> raw_a, raw_b;
  ASSERT_TRUE((*a)->WithModel([&](Model* m) {
                    terms_a = m->schema().vocab_size();
                    EXPECT_EQ(m->schema().classes(), (std::vector<std::string>{"spam", "ham"}));
                    return Status::OK();
                  })
                  .ok());
  ASSERT_TRUE((*b)->WithModel([&](Model* m) {
                    terms_b = m->schema().vocab_size();
                    return Status::OK();
                  })
                  .ok());
  EXPECT_EQ(terms_a, terms_b);
  EXPECT_EQ(terms_a,
            20u);  // win a free prize now lunch at noon the usual place money claim your meeting moved to see you time
  auto reader = (*a)->NewReader();
  ASSERT_TRUE(reader.ok());
  LivePrediction p;
  d.Clear();
  d.AddText("Claim your FREE prize now");
  ASSERT_TRUE((*reader)->Predict(d, &p).ok());
  EXPECT_EQ(p.label, "spam");
  EXPECT_EQ(p.version, 30u);
  d.Clear();
  d.AddText("lunch meeting at noon, unknownword");
  ASSERT_TRUE((*reader)->Predict(d, &p).ok());
  EXPECT_EQ(p.label, "ham");
  auto reader_b = (*b)->NewReader();
  ASSERT_TRUE(reader_b.ok());
  LivePrediction pb;
  ASSERT_TRUE((*reader_b)->Predict(d, &pb).ok());
  EXPECT_EQ(p.scores, pb.scores);  // same vocabulary order, same statistics
  // A document with nothing the model can read is refused, named.
  d.Clear();
  d.SetId("empty-one");
  Status st = (*a)->Learn(d);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("empty-one"), std::string::npos) << st.ToString();
}

// Features by name go to the schema's positions; every mistake is refused
// naming the feature, with expected vs found.
TEST(InputDocumentTest, FeaturesByNameAndTheirErrors) {
  v1::Schema proto;
  proto.add_class_names("a");
  auto* x = proto.add_features();
  x->set_name("x");
  x->set_kind(v1::FeatureSpec::REAL);
  auto* colour = proto.add_features();
  colour->set_name("colour");
  colour->set_kind(v1::FeatureSpec::CATEGORICAL);
  for (const char* c : {"red", "green", "blue"}) colour->add_categories(c);
  auto* y = proto.add_features();
  y->set_name("y");
  y->set_kind(v1::FeatureSpec::REAL);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  v1::Document out;
  InputDocument d;
  d.SetReal("y", 2.5).SetCategory("colour", "blue").SetReal("x", -1).SetLabel("a").SetWeight(3);
  ASSERT_TRUE(d.ToProto(*schema, &out).ok());
  EXPECT_EQ(std::vector<double>(out.reals().begin(), out.reals().end()), (std::vector<double>{-1, 2.5}));
  EXPECT_EQ(std::vector<uint32_t>(out.categoricals().begin(), out.categoricals().end()), std::vector<uint32_t>{2});
  EXPECT_EQ(out.label(), "a");
  EXPECT_EQ(out.weight(), 3.0);
  d.Clear();
  d.SetReal("x", 1).SetMissing("colour").SetReal("y", 0);
  ASSERT_TRUE(d.ToProto(*schema, &out).ok());
  EXPECT_EQ(std::vector<uint32_t>(out.missing_features().begin(), out.missing_features().end()),
            std::vector<uint32_t>{1});
  // A feature not given is missing, as SetMissing makes it (Python's absent
  // key, the same rule).
  v1::Document absent;
  d.Clear();
  d.SetReal("x", 1).SetReal("y", 0);
  ASSERT_TRUE(d.ToProto(*schema, &absent).ok());
  EXPECT_EQ(absent.SerializeAsString(), out.SerializeAsString());
  struct Case {
    std::function<void(InputDocument&)> fill;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](InputDocument& e) { e.SetReal("x", 1).SetReal("z", 1); },
       "feature 'z' is not in the model's schema (its features: 'x', 'colour', 'y')"},
      {[](InputDocument& e) { e.SetReal("x", 1).SetCategory("colour", "mauve").SetReal("y", 1); },
       "feature 'colour': category 'mauve' is not one of its 3 categories"},
      {[](InputDocument& e) { e.SetCategory("x", "red"); },
       "feature 'x' is numeric, expected a value (SetReal), found a category"},
      {[](InputDocument& e) { e.SetReal("colour", 1); },
       "feature 'colour' is CATEGORICAL, expected a category (SetCategory), found a value"},
      {[](InputDocument& e) { e.SetReal("x", 1).SetReal("x", 2); }, "feature 'x' is set twice"},
      {[](InputDocument& e) { e.SetReal("x", 1).SetMissing("colour").SetReal("y", 2).SetWeight(0); },
       "weight is 0, expected a finite number in (0, 1e6]"},
  };
  for (const auto& c : cases) {
    d.Clear();
    c.fill(d);
    Status st = d.ToProto(*schema, &out);
    ASSERT_FALSE(st.ok()) << c.message;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.ToString();
  }
}

// Durable mode: every acknowledged Learn is in the fsynced log. A handle
// dropped without a checkpoint (as a crash would leave it) and opened again
// holds the model that learned every acknowledged document, bit for bit; a
// checkpoint drops the log it covers and the next open starts from it; a
// torn last record (a crash in the middle of a write that was never
// acknowledged) is cut.
TEST(LiveModelTest, DurableModeKeepsEveryAcknowledgedDocument) {
  const std::vector<DocumentBuffer> docs = Stream(700, 13);
  const std::string dir = testing::TempDir("live_durable");
  LiveModelOptions opt;
  opt.data_dir = dir;
  opt.registry = &testing::BuiltinRegistry();
  auto offline = NewModel();
  auto learner = Learner::Create(offline.get(), {});
  ASSERT_TRUE(learner.ok());
  auto same_as_offline = [&](LiveModel& live, uint64_t n) {
    ASSERT_EQ(live.acknowledged(), n);
    ASSERT_TRUE(live.WithModel([&](Model* m) {
                      EXPECT_EQ(m->learner_state().updates, n);
                      EXPECT_EQ(std::memcmp(m->stats().raw().data(), offline->stats().raw().data(),
                                            offline->stats().size() * sizeof(double)),
                                0)
                          << "after " << n << " documents";
                      return Status::OK();
                    })
                    .ok());
  };
  {
    auto live = LiveModel::Create(NewModel(), opt);
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    for (size_t i = 0; i < 300; ++i) {
      ASSERT_TRUE((*live)->Learn(docs[i].View()).ok());
      ASSERT_TRUE((*learner)->Learn(docs[i].View()).ok());
    }
    // A refused document is not logged: the log holds only what was learned.
    DocumentBuffer bad = testing::MakeDoc(999, 0, {{kTerms + 3, 1.0}});
    Status st = (*live)->Learn(bad.View());
    ASSERT_FALSE(st.ok());
    EXPECT_EQ((*live)->acknowledged(), 300u);
  }  // dropped without a checkpoint
  {
    auto live = LiveModel::Create(NewModel(), opt);  // (the directory's model wins)
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    same_as_offline(**live, 300);
    EXPECT_EQ((*live)->version(), 300u);  // published at once
    for (size_t i = 300; i < 500; ++i) {
      ASSERT_TRUE((*live)->Learn(docs[i].View()).ok());
      ASSERT_TRUE((*learner)->Learn(docs[i].View()).ok());
    }
    ASSERT_TRUE((*live)->Checkpoint().ok());
    for (size_t i = 500; i < 600; ++i) {
      ASSERT_TRUE((*live)->Learn(docs[i].View()).ok());
      ASSERT_TRUE((*learner)->Learn(docs[i].View()).ok());
    }
    EXPECT_FALSE((*live)->Restore(NewModel()).ok());
  }
  ASSERT_TRUE(std::filesystem::exists(dir + "/model.trib"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/model.prev.trib"));
  uint64_t saved = 0;
  ASSERT_TRUE(Model::Load(dir + "/model.trib", testing::BuiltinRegistry(), nullptr, &saved).ok());
  EXPECT_EQ(saved, 500u);
  // A torn tail: half a record appended to the newest segment, as a crash
  // in the middle of an unacknowledged write leaves it.
  std::vector<std::string> segments;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/wal")) {
    if (e.path().extension() == ".log") segments.push_back(e.path().string());
  }
  ASSERT_FALSE(segments.empty());
  std::sort(segments.begin(), segments.end());
  {
    std::ofstream tail(segments.back(), std::ios::app | std::ios::binary);
    tail << std::string("\x80\x02partial", 9);
  }
  {
    auto live = LiveModel::Create(NewModel(), opt);
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    same_as_offline(**live, 600);
    for (size_t i = 600; i < 700; ++i) {
      ASSERT_TRUE((*live)->Learn(docs[i].View()).ok());
      ASSERT_TRUE((*learner)->Learn(docs[i].View()).ok());
    }
  }
  auto live = LiveModel::Create(NewModel(), opt);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  same_as_offline(**live, 700);

  // Durable mode needs a registry to load its snapshot.
  LiveModelOptions no_registry;
  no_registry.data_dir = testing::TempDir("live_durable_refused");
  auto refused = LiveModel::Create(NewModel(), no_registry);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("needs LiveModelOptions::registry"), std::string::npos);
}

// A model that holds a live learner (live_learner.h) is learned by it: the
// handle's publications follow the served candidate when it changes, versions
// count labelled documents, and a durable handle dropped without a checkpoint
// comes back, from its snapshot and log, as the learner that never stopped -
// every candidate, window, held document and alarm, bit for bit.
TEST(LiveModelTest, ALiveLearnerIsServedAndRecoveredBitForBit) {
  // Grouped by class first (the NLL candidate takes over), then mixed.
  std::vector<DocumentBuffer> docs = Stream(1600, 21);
  std::stable_sort(docs.begin(), docs.begin() + 800,
                   [](const DocumentBuffer& a, const DocumentBuffer& b) { return a.label < b.label; });
  ModelFactory factory = [](const CandidateSpec& c) -> Result<std::unique_ptr<Model>> {
    auto m = NewModel(c.loss);
    m->learner_state().schedule.lambda = testing::BuiltinLoss(c.loss)->loss().default_lambda;
    return m;
  };
  LiveLearnerOptions lo;
  ModelConfig base;
  lo.candidates = DefaultLiveCandidates(base);
  auto make = [&]() {
    auto l = LiveLearner::Create(factory, lo);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return std::move(l).value();
  };
  auto offline = make();
  auto as_model = LiveLearner::ToModel(make());
  ASSERT_TRUE(as_model.ok());

  // Without a registry the candidates cannot be loaded: refused by name.
  {
    auto copy = (*as_model)->Clone();
    ASSERT_TRUE(copy.ok());
    auto refused = LiveModel::Create(std::move(copy).value(), LiveModelOptions{});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("registry"), std::string::npos) << refused.status().ToString();
  }
  const std::string dir = testing::TempDir("live_model_live");
  const std::string states = testing::TempDir("live_model_live_states");
  LiveModelOptions opt;
  opt.data_dir = dir;
  opt.registry = &testing::BuiltinRegistry();
  opt.publish_every = 50;
  auto same_as_offline = [&](LiveModel& live, const std::string& when) {
    const std::string path = states + "/state_" + std::to_string(offline->labelled()) + ".trib";
    ASSERT_TRUE(live.SaveState(path).ok());
    auto expect = offline->Serialize();
    ASSERT_TRUE(expect.ok());
    EXPECT_TRUE(testing::ReadFile(path) == *expect) << when << ": the learner differs from the offline one";
    EXPECT_EQ(live.learned(), offline->labelled());
    EXPECT_EQ(live.live_report(), offline->ToJson());
  };
  size_t served_changes = 0;
  {
    auto live = LiveModel::Create(std::move(as_model).value(), opt);
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    EXPECT_TRUE((*live)->is_live());
    auto reader = (*live)->NewReader();
    ASSERT_TRUE(reader.ok());
    size_t served = offline->served_index();
    for (size_t i = 0; i < 1100; ++i) {
      LearnResult r;
      LiveStep step;
      ASSERT_TRUE((*live)->Learn(docs[i].View(), &r).ok());
      ASSERT_TRUE(offline->Learn(docs[i], &step).ok());
      ASSERT_EQ(*r.scores, *step.scores) << "document " << i;
      EXPECT_EQ(r.drift_alarm, step.alarm);
      EXPECT_EQ(r.switched, step.switched);
      if (offline->served_index() != served) {
        ++served_changes;
        served = offline->served_index();
      }
      if ((i + 1) % 50 == 0) {
        // Published: the served candidate's model at this version.
        LivePrediction p;
        ASSERT_TRUE((*reader)->Predict(docs[1599].View(), &p).ok());
        EXPECT_EQ(p.version, offline->labelled());
        std::vector<double> want(kClasses);
        auto state = offline->served().NewScoringState();
        ASSERT_TRUE(offline->served().Score(docs[1599].View(), state->get(), want.data()).ok());
        ASSERT_EQ(p.scores, want) << "after document " << i;
      }
    }
    EXPECT_GE(served_changes, 1u) << "the served candidate never changed: " << offline->ToJson();
    same_as_offline(**live, "before the drop");
    ASSERT_TRUE((*live)->Checkpoint().ok());
    for (size_t i = 1100; i < 1400; ++i) {
      ASSERT_TRUE((*live)->Learn(docs[i].View()).ok());
      ASSERT_TRUE(offline->Learn(docs[i]).ok());
    }
  }                                                // dropped without a checkpoint: 300 documents only in the log
  auto live = LiveModel::Create(NewModel(), opt);  // (the directory's learner wins)
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_TRUE((*live)->is_live());
  EXPECT_EQ((*live)->version(), 1400u);
  same_as_offline(**live, "after the replay");
  for (size_t i = 1400; i < 1600; ++i) {
    ASSERT_TRUE((*live)->Learn(docs[i].View()).ok());
    ASSERT_TRUE(offline->Learn(docs[i]).ok());
  }
  same_as_offline(**live, "at the end");
  // A live learner learns with sdEM only.
  LiveModelOptions sep = opt;
  sep.data_dir.clear();
  sep.learner.engine = Engine::kSep;
  auto m = LiveLearner::ToModel(make());
  ASSERT_TRUE(m.ok());
  auto refused = LiveModel::Create(std::move(m).value(), sep);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("sdEM"), std::string::npos) << refused.status().ToString();
}

}  // namespace
}  // namespace tributary
