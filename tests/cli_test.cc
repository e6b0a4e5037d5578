// The command-line program end to end: predict, prequential, plugins,
// determinism, open classes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "test_util.h"
#include "tributary/stream_io.h"
#include "tributary/version.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name()); }
  // A learnable 3-class stream: class k prefers terms [10k, 10k+10).
  std::string MakeStream(const std::string& name, int n, uint64_t seed, bool open_classes = false,
                         const std::vector<std::string>& extra_labels = {}) {
    v1::StreamHeader h = NewStreamHeader();
    *h.mutable_schema() = testing::TextSchema(40, 3);
    h.mutable_schema()->set_open_classes(open_classes);
    h.set_document_count(static_cast<uint64_t>(n));
    std::string p = dir_ + "/" + name;
    auto w = DocumentWriter::Create(p, h);
    std::mt19937_64 rng(seed);
    for (int i = 0; i < n; ++i) {
      v1::Document d;
      d.set_id("d" + std::to_string(i));
      uint32_t k = static_cast<uint32_t>(rng() % 3);
      std::string label = "c" + std::to_string(k);
      if (!extra_labels.empty() && i >= n / 2 && i % 4 == 0) {
        label = extra_labels[0];
        k = 3;
      }
      d.set_label(label);
      for (int j = 0; j < 6; ++j) {
        uint32_t t =
            (rng() % 3 == 0) ? static_cast<uint32_t>(rng() % 40) : static_cast<uint32_t>((10 * k + rng() % 10) % 40);
        d.add_term_ids(t);
      }
      EXPECT_TRUE((*w)->Write(d).ok());
    }
    EXPECT_TRUE((*w)->Close().ok());
    return p;
  }
  int Run(const std::string& args, std::string* out, bool merge = false) {
    return testing::RunCommand(testing::ProgramPath() + " " + args, out, merge);
  }
  std::string dir_;
};

std::string ReadAll(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(CliTest, TrainEvalPredictJsonl) {
  std::string train = MakeStream("train.pb", 600, 1), test = MakeStream("test.pb", 300, 2);
  std::string out;
  ASSERT_EQ(Run("train -q --in " + train + " --out " + dir_ + "/m.trib", &out, true), 0) << out;
  ASSERT_EQ(Run("eval --json --model " + dir_ + "/m.trib --in " + test, &out), 0);
  json e = json::parse(out);
  EXPECT_EQ(e["documents"], 300);
  EXPECT_GT(e["accuracy"].get<double>(), 0.8);
  EXPECT_GT(e["ncll"].get<double>(), 0.0);
  EXPECT_TRUE(e.contains("macro_f1") && e.contains("perplexity") && e.contains("hinge"));
  ASSERT_EQ(Run("predict --model " + dir_ + "/m.trib --in " + test, &out), 0);
  std::istringstream lines(out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    json j = json::parse(line);
    double sum = 0, best = -1;
    std::string arg;
    for (auto& [k, v] : j["probabilities"].items()) {
      sum += v.get<double>();
      if (v.get<double>() > best) {
        best = v.get<double>();
        arg = k;
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-9);
    EXPECT_EQ(j["predicted"], arg);
    EXPECT_EQ(j["id"], "d" + std::to_string(n));
    ++n;
  }
  EXPECT_EQ(n, 300);
}

TEST_F(CliTest, PredictProtobufOutput) {
  std::string train = MakeStream("train.pb", 200, 1);
  std::string out;
  ASSERT_EQ(Run("train -q --in " + train + " --out " + dir_ + "/m.trib", &out, true), 0) << out;
  ASSERT_EQ(
      Run("predict --format pb --model " + dir_ + "/m.trib --in " + train + " --out " + dir_ + "/p.pb", &out, true), 0)
      << out;
  // Frames: a PredictionHeader, then one Prediction per document.
  std::string data = ReadAll(dir_ + "/p.pb");
  google::protobuf::io::ArrayInputStream arr(data.data(), static_cast<int>(data.size()));
  google::protobuf::io::CodedInputStream in(&arr);
  uint32_t len;
  ASSERT_TRUE(in.ReadVarint32(&len));
  std::string buf;
  ASSERT_TRUE(in.ReadString(&buf, static_cast<int>(len)));
  v1::PredictionHeader h;
  ASSERT_TRUE(h.ParseFromString(buf));
  EXPECT_EQ(h.magic(), "tributary.predictions");
  EXPECT_EQ(h.class_names_size(), 3);
  int count = 0;
  while (in.ReadVarint32(&len)) {
    ASSERT_TRUE(in.ReadString(&buf, static_cast<int>(len)));
    v1::Prediction p;
    ASSERT_TRUE(p.ParseFromString(buf));
    EXPECT_EQ(p.probabilities_size(), 3);
    EXPECT_EQ(p.index(), static_cast<uint64_t>(count));
    ++count;
  }
  EXPECT_EQ(count, 200);
}

TEST_F(CliTest, PrequentialCurve) {
  std::string s = MakeStream("s.pb", 1000, 3);
  std::string out;
  ASSERT_EQ(Run("prequential -q --json --every 250 --in " + s, &out), 0);
  json j = json::parse(out);
  ASSERT_EQ(j["curve"].size(), 4u);
  EXPECT_EQ(j["curve"][0]["documents"], 250);
  EXPECT_EQ(j["curve"][3]["documents"], 1000);
  EXPECT_EQ(j["documents"], 1000);
  // Learning from the stream: the last window beats the first.
  EXPECT_GT(j["curve"][3]["window_accuracy"].get<double>(), j["curve"][0]["window_accuracy"].get<double>() - 0.05);
  EXPECT_GT(j["accuracy"].get<double>(), 0.7);
  // Progressive log-loss and hinge, cumulative and per window: learning shows
  // as a falling window log-loss, and the cumulative figures are the means of
  // the windows (equal windows).
  for (const char* key : {"ncll", "hinge"}) {
    const std::string w = std::string("window_") + key;
    double mean = 0;
    for (const auto& pt : j["curve"]) {
      ASSERT_TRUE(pt[key].is_number() && pt[w].is_number()) << pt;
      EXPECT_GE(pt[w].get<double>(), 0.0);
      mean += pt[w].get<double>() / 4;
    }
    EXPECT_NEAR(j["curve"][3][key].get<double>(), mean, 1e-9) << key;
    EXPECT_NEAR(j[key].get<double>(), mean, 1e-9) << key;
  }
  EXPECT_LT(j["curve"][3]["window_ncll"].get<double>(), j["curve"][0]["window_ncll"].get<double>());
  // Prequential accuracy = fraction of documents predicted right before learning them.
  ASSERT_EQ(Run("prequential -q --every 500 --in " + s, &out), 0);
  EXPECT_THAT(out, HasSubstr("prequential accuracy"));
  EXPECT_THAT(
      out, HasSubstr("documents\taccuracy\twindow_accuracy\tncll\twindow_ncll\thinge\twindow_hinge\talarms\tserved"));
  EXPECT_THAT(out, HasSubstr("lowest recall:"));
  EXPECT_THAT(out, HasSubstr("live learner: served '"));
  // The per-class view: every class's recall, consistent with the accuracy
  // (documents-weighted mean recall = accuracy), the confusions, and the
  // live learner's candidates (one of them served) with its alarms.
  double weighted = 0, docs = 0;
  ASSERT_EQ(j["per_class"].size(), 3u) << j["per_class"];
  for (const auto& c : j["per_class"]) {
    weighted += c["recall"].get<double>() * c["documents"].get<double>();
    docs += c["documents"].get<double>();
  }
  EXPECT_EQ(docs, 1000);
  EXPECT_NEAR(weighted / docs, j["accuracy"].get<double>(), 1e-9);
  for (const auto& c : j["most_confused"]) EXPECT_NE(c["class"], c["predicted"]);
  ASSERT_TRUE(j["live"].is_object()) << j;
  EXPECT_EQ(j["live"]["candidates"].size(), 3u);
  int served = 0;
  for (const auto& c : j["live"]["candidates"]) served += c["served"].get<bool>();
  EXPECT_EQ(served, 1);
  EXPECT_TRUE(j["curve"][3]["served"].is_string());
  EXPECT_TRUE(j["curve"][3]["alarms"].is_array());
  // --select off: one learner, no live report.
  ASSERT_EQ(Run("prequential -q --json --select off --every 250 --in " + s, &out), 0);
  EXPECT_FALSE(json::parse(out).contains("live"));
}

TEST_F(CliTest, SameSeedSameModelBitForBit) {
  std::string s = MakeStream("s.pb", 300, 4);
  std::string out;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(
        Run("train -q --shuffle --seed 9 --epochs 3 --in " + s + " --out " + dir_ + "/m" + std::to_string(i) + ".trib",
            &out, true),
        0)
        << out;
  }
  EXPECT_EQ(ReadAll(dir_ + "/m0.trib"), ReadAll(dir_ + "/m1.trib"));
  ASSERT_EQ(Run("train -q --shuffle --seed 10 --epochs 3 --in " + s + " --out " + dir_ + "/m2.trib", &out, true), 0);
  EXPECT_NE(ReadAll(dir_ + "/m0.trib"), ReadAll(dir_ + "/m2.trib"));
}

// --loss-opt reaches the loss (ABI 1.2 options), is kept in the snapshot, and
// a bad key or value is refused naming it.
// prequential --plot draws the curve with the Python package's plotting code
// (python/tributary/plot.py, compiled in) run by Debian's python3: a PNG
// comes out, and a missing interpreter is named, not a silent no-picture.
TEST_F(CliTest, PrequentialPlotDrawsThePng) {
  std::string s = MakeStream("s.pb", 600, 3);
  const std::string png = dir_ + "/curve.png";
  std::string out;
  ASSERT_EQ(Run("prequential -q --json --every 100 --plot " + png + " --in " + s, &out), 0) << out;
  EXPECT_EQ(json::parse(out)["curve"].size(), 6u);  // --json still prints the result
  std::ifstream f(png, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 5000u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_FALSE(std::ifstream(png + ".curve.json").good()) << "the data file is removed";
  ASSERT_NE(testing::RunCommand("TRIBUTARY_PYTHON=/nonexistent/python3 " + testing::ProgramPath() +
                                    " prequential -q --plot " + dir_ + "/b.png --in " + s,
                                &out, true),
            0);
  EXPECT_THAT(out, HasSubstr("--plot '" + dir_ + "/b.png': cannot run /nonexistent/python3"));
}

// A live stream on standard input: train and prequential read it once (the
// header and the documents through the same reader; standard input cannot
// be reopened) and learn exactly what they learn from the file.
TEST_F(CliTest, StandardInputIsReadOnceAndLearnsLikeTheFile) {
  const std::string s = MakeStream("s.pb", 300, 9);
  std::string out;
  ASSERT_EQ(Run("train -q --select off --in " + s + " --out " + dir_ + "/file.trib", &out, true), 0) << out;
  ASSERT_EQ(testing::RunCommand("cat " + s + " | " + testing::ProgramPath() + " train -q --select off --in - --out " +
                                    dir_ + "/stdin.trib",
                                &out, true),
            0)
      << out;
  EXPECT_EQ(ReadAll(dir_ + "/file.trib"), ReadAll(dir_ + "/stdin.trib"));
  ASSERT_EQ(
      testing::RunCommand("cat " + s + " | " + testing::ProgramPath() +
                              " train -q --select off --shuffle --epochs 2 --in - " + "--out " + dir_ + "/stdin2.trib",
                          &out, true),
      0)
      << out;
  ASSERT_EQ(Run("train -q --select off --shuffle --epochs 2 --in " + s + " --out " + dir_ + "/file2.trib", &out, true),
            0)
      << out;
  EXPECT_EQ(ReadAll(dir_ + "/file2.trib"), ReadAll(dir_ + "/stdin2.trib"));
  std::string from_file, from_stdin;
  ASSERT_EQ(Run("prequential --json --every 100 --in " + s, &from_file), 0);
  ASSERT_EQ(testing::RunCommand("cat " + s + " | " + testing::ProgramPath() + " prequential --json --every 100 --in -",
                                &from_stdin),
            0);
  EXPECT_EQ(from_file, from_stdin);
  EXPECT_EQ(json::parse(from_stdin)["documents"], 300) << from_stdin;
  // Several passes need the file (or --shuffle, which keeps the documents).
  EXPECT_EQ(testing::RunCommand(
                "cat " + s + " | " + testing::ProgramPath() + " train -q --epochs 2 --in - --out " + dir_ + "/x.trib",
                &out, true),
            1);
  EXPECT_THAT(out, HasSubstr("--epochs > 1 needs a file"));
}

// train --resume M continues a snapshot with its own loss, options,
// schedule and step counter: two halves with a resume equal one run, bit for
// bit (the family's cached totals travel in the snapshot).
TEST_F(CliTest, ResumeInTwoHalvesEqualsOneRun) {
  const std::string s = MakeStream("all.pb", 400, 21);
  auto r = DocumentReader::Open(s, kDefaultMaxFrameBytes);
  ASSERT_TRUE(r.ok());
  auto first = DocumentWriter::Create(dir_ + "/h1.pb", (*r)->header());
  auto second = DocumentWriter::Create(dir_ + "/h2.pb", (*r)->header());
  ASSERT_TRUE(first.ok() && second.ok());
  v1::Document d;
  for (int i = 0;; ++i) {
    bool eof = false;
    ASSERT_TRUE((*r)->Next(&d, &eof).ok());
    if (eof) break;
    ASSERT_TRUE((i < 170 ? *first : *second)->Write(d).ok());
  }
  ASSERT_TRUE((*first)->Close().ok() && (*second)->Close().ok());
  for (const char* loss : {"ncll", "hinge"}) {
    SCOPED_TRACE(loss);
    const std::string L = std::string(" --loss ") + loss + " --select off --n 400 --prior 2 ";
    std::string out, one, two;
    ASSERT_EQ(Run("train -q" + L + "--in " + s + " --out " + dir_ + "/one.trib", &out, true), 0) << out;
    ASSERT_EQ(Run("train -q" + L + "--in " + dir_ + "/h1.pb --out " + dir_ + "/half.trib", &out, true), 0) << out;
    ASSERT_EQ(
        Run("train -q --resume " + dir_ + "/half.trib --in " + dir_ + "/h2.pb --out " + dir_ + "/two.trib", &out, true),
        0)
        << out;
    ASSERT_EQ(Run("inspect --json --model " + dir_ + "/one.trib", &one), 0);
    ASSERT_EQ(Run("inspect --json --model " + dir_ + "/two.trib", &two), 0);
    EXPECT_EQ(json::parse(one)["stats_digest"], json::parse(two)["stats_digest"]);
    EXPECT_EQ(json::parse(two)["updates"], 400);
    EXPECT_EQ(json::parse(two)["loss"], loss);
    // A resumed half is not the whole: the test can fail.
    std::string half;
    ASSERT_EQ(Run("inspect --json --model " + dir_ + "/half.trib", &half), 0);
    EXPECT_NE(json::parse(one)["stats_digest"], json::parse(half)["stats_digest"]);
  }
  std::string out;
  EXPECT_EQ(Run("train -q --resume " + dir_ + "/nosuch.trib --in " + s + " --out " + dir_ + "/x.trib", &out, true), 1);
  EXPECT_THAT(out, HasSubstr("nosuch.trib"));
}

// Without tuning flags NCLL and hinge try candidates on held-out training
// documents; inspect shows which setting was kept and why. Standard input
// (one pass) is learned by the live learner, as serve learns; inspect shows
// its candidates and the one served.
TEST_F(CliTest, DefaultsChooseOnTheTrainingStreamAndSaySo) {
  const std::string s = MakeStream("s.pb", 400, 5);
  {
    std::string out, info;
    ASSERT_EQ(testing::RunCommand(
                  "cat " + s + " | " + testing::ProgramPath() + " train --loss hinge --in - --out " + dir_ + "/l.trib",
                  &out, true),
              0)
        << out;
    EXPECT_THAT(out, HasSubstr("live learner (one pass, arrival order): served '"));
    ASSERT_EQ(Run("inspect --json --model " + dir_ + "/l.trib", &info), 0);
    const json j = json::parse(info);
    ASSERT_TRUE(j.contains("live")) << info;
    EXPECT_EQ(j["live"]["labelled"], 400);
    ASSERT_EQ(j["live"]["candidates"].size(), 3u);
    int served = 0;
    for (const auto& c : j["live"]["candidates"]) served += c["served"].get<bool>();
    EXPECT_EQ(served, 1);
    EXPECT_EQ(j["live"]["candidates"][0]["label"], "hinge");
    EXPECT_EQ(j["live"]["candidates"][2]["label"], "nll (generative)");
  }
  for (const char* in : {"file", "stdin --shuffle"}) {
    SCOPED_TRACE(in);
    std::string out, info;
    const std::string cmd =
        std::string(in) == "file"
            ? testing::ProgramPath() + " train --loss hinge --in " + s + " --out " + dir_ + "/m.trib"
            : "cat " + s + " | " + testing::ProgramPath() + " train --loss hinge --shuffle --in - --out " + dir_ +
                  "/m.trib";
    ASSERT_EQ(testing::RunCommand(cmd, &out, true), 0) << out;
    EXPECT_THAT(out, HasSubstr("chose '"));
    ASSERT_EQ(Run("inspect --json --model " + dir_ + "/m.trib", &info), 0);
    json j = json::parse(info);
    ASSERT_TRUE(j.contains("training")) << info;
    const json& t = j["training"];
    EXPECT_EQ(t["mode"], std::string(in) == "file" ? "offline" : "streaming");
    EXPECT_GT(t["validation_documents"].get<int>(), 10);
    int kept = 0;
    bool has_nll = false;
    for (const auto& c : t["candidates"]) {
      kept += c["kept"].get<bool>();
      has_nll |= c["setting"] == "nll (generative)";
      if (c["kept"].get<bool>()) {
        EXPECT_EQ(c["setting"], t["kept"]);
      }
    }
    EXPECT_EQ(kept, 1);
    EXPECT_TRUE(has_nll);
    // The streaming mode runs at most three learners.
    if (std::string(in) != "file") {
      EXPECT_LE(t["candidates"].size(), 3u);
    }
  }
}

// A file larger than --search-documents: the candidates search a sample,
// the kept setting learns the rest once; the report says so, and the model
// does not depend on --threads.
TEST_F(CliTest, LargeFileSearchIsBoundedAndThreadsDoNotChangeTheModel) {
  const std::string s = MakeStream("s.pb", 1500, 5);
  std::string out, info;
  for (const char* threads : {"1", "2"}) {
    ASSERT_EQ(Run(std::string("train -q --loss ncll --search-documents 300 --threads ") + threads + " --in " + s +
                      " --out " + dir_ + "/t" + threads + ".trib",
                  &out, true),
              0)
        << out;
  }
  EXPECT_EQ(ReadAll(dir_ + "/t1.trib"), ReadAll(dir_ + "/t2.trib"));
  ASSERT_EQ(Run("inspect --json --model " + dir_ + "/t2.trib", &info), 0);
  const json t = json::parse(info)["training"];
  EXPECT_NEAR(t["searched_documents"].get<double>(), 300.0, 5.0) << info;
  const int validation = t["validation_documents"].get<int>();
  EXPECT_NEAR(validation, 150, 5) << info;
  // NLL learns every document it has not seen; NCLL the other training
  // documents, unless validation kept its state from the search.
  const int continued = t["continued_documents"].get<int>();
  const int searched = t["searched_documents"].get<int>();
  if (t["kept"].get<std::string>().rfind("nll", 0) == 0) {
    EXPECT_EQ(continued, 1500 - searched) << info;
  } else {
    EXPECT_TRUE(continued == 0 || continued == 1500 - validation - searched) << info;
  }
  // Every step counted: far fewer than searching the whole file.
  ASSERT_EQ(Run("train -q --loss ncll --search-documents 0 --in " + s + " --out " + dir_ + "/all.trib", &out, true), 0)
      << out;
  ASSERT_EQ(Run("inspect --json --model " + dir_ + "/all.trib", &info), 0);
  const json all = json::parse(info)["training"];
  EXPECT_EQ(all["searched_documents"].get<int>(), 1500 - all["validation_documents"].get<int>());
  EXPECT_LT(t["document_updates"].get<double>(), all["document_updates"].get<double>());
}

TEST_F(CliTest, LossOptionsReachTheLossAndTheSnapshot) {
  std::string s = MakeStream("s.pb", 300, 4);
  std::string out;
  ASSERT_EQ(Run("train -q --select off --loss hinge --loss-opt margin=10 --in " + s + " --out " + dir_ + "/m10.trib",
                &out, true),
            0)
      << out;
  ASSERT_EQ(Run("train -q --select off --loss hinge --in " + s + " --out " + dir_ + "/m1.trib", &out, true), 0) << out;
  EXPECT_NE(ReadAll(dir_ + "/m10.trib"), ReadAll(dir_ + "/m1.trib")) << "a wider margin must change the updates";
  ASSERT_EQ(Run("inspect --json --model " + dir_ + "/m10.trib", &out), 0) << out;
  EXPECT_NE(out.find("\"loss_options\":{\"margin\":\"10\"}"), std::string::npos) << out;
  EXPECT_EQ(Run("train -q --loss hinge --loss-opt margin=0 --in " + s + " --out " + dir_ + "/x.trib", &out, true), 1);
  EXPECT_NE(out.find("margin='0': expected a number > 0"), std::string::npos) << out;
  EXPECT_EQ(Run("train -q --loss ncll --loss-opt margin=3 --in " + s + " --out " + dir_ + "/x.trib", &out, true), 1);
  EXPECT_NE(out.find("loss 'ncll' takes no options"), std::string::npos) << out;
  EXPECT_EQ(Run("train -q --loss hinge --loss-opt margin --in " + s + " --out " + dir_ + "/x.trib", &out, true), 1);
  EXPECT_NE(out.find("--loss-opt 'margin': expected key=value"), std::string::npos) << out;
}

TEST_F(CliTest, OpenClassesGrowTheModel) {
  std::string s = MakeStream("open.pb", 400, 5, true, {"late"});
  std::string out;
  ASSERT_EQ(Run("train -q --in " + s + " --out " + dir_ + "/m.trib", &out, true), 0) << out;
  auto m = Model::Load(dir_ + "/m.trib", testing::BuiltinRegistry());
  ASSERT_TRUE(m.ok());
  ASSERT_EQ((*m)->num_classes(), 4u);
  EXPECT_EQ((*m)->schema().classes()[3], "late");
  // Closed schema: the same label is an error naming the document.
  std::string closed = MakeStream("closed.pb", 400, 5, false, {"late"});
  EXPECT_EQ(Run("train -q --in " + closed + " --out " + dir_ + "/m2.trib", &out, true), 1);
  EXPECT_THAT(out, HasSubstr("label 'late' is not a class of the model"));
}

TEST_F(CliTest, PluginsListing) {
  std::string out;
  ASSERT_EQ(Run("plugins --json", &out), 0);
  json j = json::parse(out);
  std::set<std::string> names;
  for (auto& p : j["plugins"]) names.insert(p["kind"].get<std::string>() + ":" + p["name"].get<std::string>());
  for (const char* want : {"family:multinomial", "family:gaussian", "loss:nll", "loss:ncll", "loss:hinge"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  // A directory with broken plugins is searched through TRIBUTARY_PLUGIN_PATH.
  ASSERT_EQ(testing::RunCommand(
                "TRIBUTARY_PLUGIN_PATH=" TRIBUTARY_FIXTURE_PLUGIN_DIR " " + testing::ProgramPath() + " plugins", &out),
            0);
  EXPECT_THAT(out, HasSubstr("double-ncll"));
  EXPECT_THAT(out, HasSubstr("refused"));
  EXPECT_THAT(out, HasSubstr("ABI major version mismatch"));
}

// `plugins --options NAME`: the plugin's option table (ABI 1.3), as text and
// JSON; a plugin without a table says so; an unknown name is an error listing
// the names there are.
TEST_F(CliTest, PluginsOptionsShowsTheOptionTable) {
  std::string out;
  ASSERT_EQ(Run("plugins --options multinomial", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("family multinomial "));
  EXPECT_THAT(out, HasSubstr("name\ttype\tdefault\trange\thelp\n"));
  EXPECT_THAT(out, HasSubstr("\nprior\tnumber\t1\t> 0, or laplace|log\tDirichlet pseudo-count"));
  EXPECT_THAT(out, HasSubstr("\nclass_prior\tnumber\t1\t> 0\t"));
  EXPECT_THAT(out, HasSubstr("\nfloor\tchoice\tpaper\tpaper|prior\t"));
  ASSERT_EQ(Run("plugins --options multinomial --json", &out), 0) << out;
  json j = json::parse(out);
  ASSERT_EQ(j["plugins"].size(), 1u);
  const json& p = j["plugins"][0];
  EXPECT_EQ(p["kind"], "family");
  EXPECT_EQ(p["name"], "multinomial");
  EXPECT_EQ(p["option_table"], true);
  ASSERT_EQ(p["options"].size(), 3u);
  const json& prior = p["options"][0];
  EXPECT_EQ(prior["name"], "prior");
  EXPECT_EQ(prior["type"], "number");
  EXPECT_EQ(prior["default"], "1");
  EXPECT_EQ(prior["min"], 0.0);
  EXPECT_TRUE(prior["max"].is_null());
  EXPECT_EQ(prior["min_exclusive"], true);
  EXPECT_EQ(prior["words"], json::array({"laplace", "log"}));
  EXPECT_EQ(prior["expected"], "laplace, log or a number > 0");
  EXPECT_FALSE(prior["help"].get<std::string>().empty());
  EXPECT_EQ(p["options"][2]["choices"], json::array({"paper", "prior"}));
  // Aliases and derived defaults (lda), a loss, a loss without options.
  ASSERT_EQ(Run("plugins --options lda", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("\nprior\talias\t-\talias of eta\t"));
  EXPECT_THAT(out, HasSubstr("\nalpha\tnumber\t1/K\t(0, 1e100], or learn\t"));
  ASSERT_EQ(Run("plugins --options hinge", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("\nweights\tchoice\ttable1\ttable1|algorithm4\t"));
  ASSERT_EQ(Run("plugins --options nll", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("loss nll 1.1.0"));
  EXPECT_THAT(out, HasSubstr("takes no options"));
  // A third-party plugin without a table (built for ABI 1.3 all the same).
  ASSERT_EQ(testing::RunCommand("TRIBUTARY_PLUGIN_PATH=" TRIBUTARY_FIXTURE_PLUGIN_DIR " " + testing::ProgramPath() +
                                    " plugins --options double-ncll",
                                &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("loss double-ncll 0.3.0"));
  EXPECT_THAT(out, HasSubstr("no option table"));
  // Unknown name: exit 1, the names there are.
  EXPECT_EQ(Run("plugins --options no-such-plugin", &out, true), 1);
  EXPECT_THAT(out, HasSubstr("no family or loss plugin named 'no-such-plugin'"));
  EXPECT_THAT(out, HasSubstr("families: "));
  EXPECT_THAT(out, HasSubstr("multinomial"));
  EXPECT_THAT(out, HasSubstr("losses: hinge, ncll, nll"));
}

// `inspect` shows every option of the family and the loss with its value,
// marking the ones left at their default; the options as given stay where they
// were (family_options, loss_options).
TEST_F(CliTest, InspectShowsOptionValuesAndDefaults) {
  std::string s = MakeStream("s.pb", 100, 4);
  std::string out;
  ASSERT_EQ(
      Run("train -q --select off --loss hinge --loss-opt margin=3 --prior 2 --in " + s + " --out " + dir_ + "/m.trib",
          &out, true),
      0)
      << out;
  ASSERT_EQ(Run("inspect --model " + dir_ + "/m.trib", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("family option prior\t2\n"));
  EXPECT_THAT(out, HasSubstr("family option class_prior\t1 (default)\n"));
  EXPECT_THAT(out, HasSubstr("family option floor\tpaper (default)\n"));
  EXPECT_THAT(out, HasSubstr("loss option margin\t3\n"));
  EXPECT_THAT(out, HasSubstr("loss option weights\ttable1 (default)\n"));
  ASSERT_EQ(Run("inspect --json --model " + dir_ + "/m.trib", &out), 0) << out;
  json j = json::parse(out);
  EXPECT_EQ(j["family_options"], json({{"prior", "2"}}));
  EXPECT_EQ(j["loss_options"], json({{"margin", "3"}}));
  ASSERT_EQ(j["family_option_values"].size(), 3u);
  EXPECT_EQ(j["family_option_values"][0], json({{"name", "prior"}, {"value", "2"}, {"default", false}}));
  EXPECT_EQ(j["family_option_values"][1], json({{"name", "class_prior"}, {"value", "1"}, {"default", true}}));
  EXPECT_EQ(j["loss_option_values"][1], json({{"name", "weights"}, {"value", "table1"}, {"default", true}}));
  // Aliases fold into their option; derived defaults say so.
  ASSERT_EQ(Run("train -q --select off --family lda --loss nll --topics 3 --opt prior=0.2 --in " + s + " --out " +
                    dir_ + "/lda.trib",
                &out, true),
            0)
      << out;
  ASSERT_EQ(Run("inspect --json --model " + dir_ + "/lda.trib", &out), 0) << out;
  j = json::parse(out);
  bool eta = false, alpha = false;
  for (const auto& e : j["family_option_values"]) {
    EXPECT_NE(e["name"], "prior");  // the alias
    if (e["name"] == "eta") eta = e["value"] == "0.2" && e["default"] == false;
    if (e["name"] == "alpha") alpha = e["value"] == "1/K" && e["default"] == true && e["derived"] == true;
  }
  EXPECT_TRUE(eta && alpha) << j["family_option_values"].dump();
}

// A plugin that crashes while loading (init_segfaults.so raises SIGSEGV in
// its init), found on TRIBUTARY_PLUGIN_PATH, is probed in a child process:
// `plugins` lists it as refused with its signal, and commands that do not
// name it run as if it were not there.
TEST_F(CliTest, PluginThatCrashesAtLoadIsIsolated) {
  const std::string env = "TRIBUTARY_PLUGIN_PATH=" TRIBUTARY_FIXTURE_PLUGIN_DIR " ";
  std::string out;
  ASSERT_EQ(testing::RunCommand(env + testing::ProgramPath() + " plugins --json", &out), 0) << out;
  json j = json::parse(out);
  bool found = false;
  for (const auto& r : j["refused"]) {
    if (r["path"].get<std::string>().find("init_segfaults.so") == std::string::npos) continue;
    found = true;
    // SIGSEGV; under AddressSanitizer with abort_on_error its handler aborts (SIGABRT).
    EXPECT_THAT(r["reason"].get<std::string>(), HasSubstr("crashed while loading (signal")) << r;
  }
  EXPECT_TRUE(found) << out;
  std::set<std::string> names;
  for (auto& p : j["plugins"]) names.insert(p["name"].get<std::string>());
  EXPECT_TRUE(names.count("multinomial") && names.count("double-ncll")) << out;
  const std::string s = MakeStream("s.pb", 200, 8);
  ASSERT_EQ(testing::RunCommand(env + testing::ProgramPath() + " train -q --family multinomial --loss ncll --in " + s +
                                    " --out " + dir_ + "/m.trib",
                                &out, true),
            0)
      << out;
  ASSERT_EQ(testing::RunCommand(env + testing::ProgramPath() + " eval --json --model " + dir_ + "/m.trib --in " + s,
                                &out, true),
            0)
      << out;
}

// The same plugin named by path on the command line (--loss FILE, --plugin
// FILE) is probed too: the program refuses it, naming it and the signal,
// instead of dying with it.
TEST_F(CliTest, PluginNamedByPathThatCrashesAtLoadIsRefused) {
  const std::string s = MakeStream("s.pb", 100, 8);
  const std::string bad = TRIBUTARY_FIXTURE_PLUGIN_DIR "/init_segfaults.so";
  std::string out;
  EXPECT_EQ(Run("train -q --loss " + bad + " --in " + s + " --out " + dir_ + "/m.trib", &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("init_segfaults.so': crashed while loading (signal")) << out;
  EXPECT_EQ(Run("--plugin " + bad + " plugins", &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("crashed while loading")) << out;
}

TEST_F(CliTest, ThirdPartyLossByNameAndByPath) {
  std::string s = MakeStream("s.pb", 200, 6);
  std::string out;
  ASSERT_EQ(testing::RunCommand("TRIBUTARY_PLUGIN_PATH=" TRIBUTARY_FIXTURE_PLUGIN_DIR " " + testing::ProgramPath() +
                                    " train -q --loss double-ncll --in " + s + " --out " + dir_ + "/a.trib",
                                &out, true),
            0)
      << out;
  ASSERT_EQ(Run("train -q --select off --loss " TRIBUTARY_FIXTURE_PLUGIN_DIR "/good_loss.so --in " + s + " --out " +
                    dir_ + "/b.trib",
                &out, true),
            0)
      << out;
  // A model trained with a plugin named by path records the plugin's name
  // (and, for the message, its path); loading it finds the plugin by name on
  // the search path and never loads the recorded path (issue 13).
  EXPECT_EQ(Run("eval --json --model " + dir_ + "/b.trib --in " + s, &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("no loss plugin named 'double-ncll'"));
  EXPECT_THAT(out, HasSubstr("good_loss.so, which is never loaded from a path inside a model file"));
  EXPECT_EQ(testing::RunCommand("TRIBUTARY_PLUGIN_PATH=" TRIBUTARY_FIXTURE_PLUGIN_DIR " " + testing::ProgramPath() +
                                    " eval --json --model " + dir_ + "/b.trib --in " + s,
                                &out, true),
            0)
      << out;
  EXPECT_EQ(
      Run("train -q --loss " TRIBUTARY_FIXTURE_PLUGIN_DIR "/init_fails.so --in " + s + " --out " + dir_ + "/c.trib",
          &out, true),
      1);
  EXPECT_THAT(out, HasSubstr("init_fails.so"));
  EXPECT_THAT(out, HasSubstr("initialisation failed"));
  EXPECT_EQ(Run("train -q --family nosuch --in " + s + " --out " + dir_ + "/c.trib", &out, true), 1);
  EXPECT_THAT(out, HasSubstr("no family plugin named 'nosuch'"));
}

// A model file cannot make the program load code: a plugin recorded by path
// (the fixture writes $TRIB_LOAD_MARKER when its code is loaded) is not loaded
// by inspect, eval or predict; only the command line names files to load.
TEST_F(CliTest, ModelFileNeverLoadsAPluginByPath) {
  const std::string s = MakeStream("s.pb", 100, 2);
  const std::string marker = dir_ + "/loaded";
  std::string out;
  ASSERT_EQ(
      testing::RunCommand("TRIB_LOAD_MARKER=" + marker + " " + testing::ProgramPath() +
                              " train -q --select off --loss " TRIBUTARY_FIXTURE_PLUGIN_DIR "/load_marker.so --in " +
                              s + " --out " + dir_ + "/m.trib",
                          &out, true),
      0)
      << out;
  ASSERT_TRUE(std::filesystem::exists(marker)) << "the fixture must mark its loading";
  std::filesystem::remove(marker);
  for (const std::string& cmd : {"inspect --model " + dir_ + "/m.trib", "eval --model " + dir_ + "/m.trib --in " + s,
                                 "predict --model " + dir_ + "/m.trib --in " + s}) {
    SCOPED_TRACE(cmd);
    EXPECT_EQ(testing::RunCommand("TRIB_LOAD_MARKER=" + marker + " " + testing::ProgramPath() + " " + cmd, &out, true),
              1)
        << out;
    EXPECT_THAT(out, HasSubstr("no loss plugin named 'marked-ncll'"));
    EXPECT_THAT(out, HasSubstr("never loaded from a path inside a model file"));
    EXPECT_FALSE(std::filesystem::exists(marker)) << "the recorded plugin was loaded";
  }
  // Named by the user on the command line, the file is loaded and the model
  // finds its plugin by name.
  ASSERT_EQ(testing::RunCommand("TRIB_LOAD_MARKER=" + marker + " " + testing::ProgramPath() +
                                    " --plugin " TRIBUTARY_FIXTURE_PLUGIN_DIR "/load_marker.so eval --json --model " +
                                    dir_ + "/m.trib --in " + s,
                                &out, true),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("\"loss\":\"marked-ncll\""));
  EXPECT_TRUE(std::filesystem::exists(marker));
  // --plugin cannot take a built-in's name, and a refused file is named.
  EXPECT_EQ(Run("--plugin " TRIBUTARY_FIXTURE_PLUGIN_DIR "/shadow_nll.so plugins", &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("loss name 'nll' is already taken by built-in"));
  EXPECT_EQ(Run("--plugin " TRIBUTARY_FIXTURE_PLUGIN_DIR "/init_fails.so plugins", &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("init_fails.so"));
}

// The version is written once (project(VERSION) in CMakeLists.txt): the
// program, the library and the snapshots say the same.
TEST_F(CliTest, OneVersionEverywhere) {
  std::string out;
  ASSERT_EQ(Run("--version", &out), 0);
  EXPECT_EQ(out, std::string("tributary ") + Version() + "\n");
  std::ifstream cmake(std::string(TRIBUTARY_SOURCE_DIR) + "/CMakeLists.txt");
  std::string text((std::istreambuf_iterator<char>(cmake)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(std::string("project(Tributary VERSION ") + Version() + " "), std::string::npos);
  const std::string s = MakeStream("s.pb", 50, 3);
  ASSERT_EQ(Run("train -q --select off --in " + s + " --out " + dir_ + "/m.trib", &out, true), 0) << out;
  EXPECT_NE(ReadAll(dir_ + "/m.trib").find(std::string("tributary ") + Version()), std::string::npos);
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  std::string out;
  EXPECT_EQ(Run("train --in x.pb", &out, true), 2);
  EXPECT_EQ(Run("frobnicate", &out, true), 2);
  std::string s = MakeStream("s.pb", 20, 1);
  EXPECT_EQ(Run("train --in " + s + " --out " + dir_ + "/y --schedule sideways", &out, true), 1);
  EXPECT_THAT(out, HasSubstr("schedule 'sideways': expected inverse, poly or constant"));
  EXPECT_EQ(Run("train --in " + s + " --out " + dir_ + "/y --prior banana", &out, true), 1);
  EXPECT_THAT(out, HasSubstr("prior='banana'"));
  EXPECT_EQ(Run("train --in " + s + " --out " + dir_ + "/y --opt colour=blue", &out, true), 1);
  EXPECT_THAT(out, HasSubstr("unknown option 'colour'"));
}

}  // namespace
}  // namespace tributary
