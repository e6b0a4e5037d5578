// Plugin conformance checks (tributary/plugin_check.h, `tributary
// plugin-check`): every built-in family and loss passes, a correct tiny
// fixture family passes, and broken fixtures fail with a specific message.
#include "tributary/plugin_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string Fixture(const std::string& name) { return std::string(TRIBUTARY_FIXTURE_PLUGIN_DIR) + "/" + name + ".so"; }

const PluginCheckResult* FindCheck(const PluginCheckReport& r, const std::string& name) {
  for (const auto& c : r.checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string Describe(const PluginCheckReport& r) {
  std::string s = r.path + " (" + r.schema + ")\n";
  for (const auto& c : r.checks) s += std::string(CheckOutcomeName(c.outcome)) + " " + c.name + ": " + c.message + "\n";
  return s;
}

PluginCheckReport Check(const std::string& path) {
  PluginRegistry reg({PluginRegistry::BuiltinPluginDir()}, true);
  return CheckPlugin(reg, path);
}

TEST(PluginCheckTest, EveryBuiltinPluginPasses) {
  namespace fs = std::filesystem;
  size_t families = 0, losses = 0;
  for (const auto& e : fs::directory_iterator(PluginRegistry::BuiltinPluginDir())) {
    if (e.path().extension() != ".so") continue;
    PluginCheckReport r = Check(e.path().string());
    EXPECT_TRUE(r.ok()) << Describe(r);
    (r.kind == "family" ? families : losses)++;
    if (r.kind == "family") {
      // SEP-only families (no sdEM update) are trained with SEP; rho0-noop
      // is about the sdEM step.
      bool sep = false;
      for (const auto& [k, v] : r.info) sep |= k == "trained_with" && v == "sep";
      std::vector<std::string> must_pass = {"snapshot-roundtrip", "concurrent-score"};
      must_pass.push_back(sep ? "train-sep" : "rho0-noop");
      // Families that add classes in place (ABI 1.4).
      if (r.name == "multinomial" || r.name == "gaussian" || r.name == "lda-classifier") {
        must_pass.push_back("add-class");
      }
      // Families with frozen scoring (ABI 1.6).
      if (r.name == "multinomial" || r.name == "multinomial-mixture") must_pass.push_back("frozen-score");
      // Families with a fused step (ABI 1.7).
      if (r.name == "multinomial" || r.name == "multinomial-mixture" || r.name == "lda") {
        must_pass.push_back("fused-step");
      }
      for (const std::string& name : must_pass) {
        const auto* c = FindCheck(r, name);
        ASSERT_NE(c, nullptr) << name << "\n" << Describe(r);
        EXPECT_EQ(c->outcome, CheckOutcome::kPass) << name << "\n" << Describe(r);
      }
    }
  }
  EXPECT_GE(families, 2u);
  EXPECT_GE(losses, 3u);
}

TEST(PluginCheckTest, CorrectTinyFamilyPassesEveryCheck) {
  PluginCheckReport r = Check(Fixture("check_good"));
  ASSERT_TRUE(r.ok()) << Describe(r);
  EXPECT_EQ(r.name, "check-good");
  EXPECT_EQ(r.Count(CheckOutcome::kSkip), 0u) << Describe(r);
  for (const char* name : {"load", "rho0-noop", "cache-rebuild", "snapshot-roundtrip", "train-nll", "train-ncll",
                           "train-hinge", "concurrent-score"}) {
    EXPECT_NE(FindCheck(r, name), nullptr) << name;
  }
}

TEST(PluginCheckTest, NanScoresFailTraining) {
  PluginCheckReport r = Check(Fixture("check_nan_scores"));
  EXPECT_FALSE(r.ok());
  const auto* c = FindCheck(r, "train-nll");
  ASSERT_NE(c, nullptr) << Describe(r);
  EXPECT_EQ(c->outcome, CheckOutcome::kFail);
  EXPECT_THAT(c->message, HasSubstr("scored class 0 as nan"));
}

TEST(PluginCheckTest, StaleCacheFailsCacheRebuild) {
  PluginCheckReport r = Check(Fixture("check_stale_cache"));
  EXPECT_FALSE(r.ok());
  const auto* c = FindCheck(r, "cache-rebuild");
  ASSERT_NE(c, nullptr) << Describe(r);
  EXPECT_EQ(c->outcome, CheckOutcome::kFail);
  EXPECT_THAT(c->message, HasSubstr("cache["));
  EXPECT_THAT(c->message, HasSubstr("1e-9 relative"));
}

TEST(PluginCheckTest, CommitMovingStatisticsAtRhoZeroFailsRho0) {
  PluginCheckReport r = Check(Fixture("check_rho0_drift"));
  EXPECT_FALSE(r.ok());
  const auto* c = FindCheck(r, "rho0-noop");
  ASSERT_NE(c, nullptr) << Describe(r);
  EXPECT_EQ(c->outcome, CheckOutcome::kFail);
  EXPECT_THAT(c->message, HasSubstr("rho = 0"));
  EXPECT_THAT(c->message, HasSubstr("raw["));
}

// ABI 1.4: a class added in place must give the model grow_classes gives.
TEST(PluginCheckTest, AddClassThatDisturbsTheModelFailsAddClass) {
  PluginCheckReport r = Check(Fixture("check_add_class_drift"));
  EXPECT_FALSE(r.ok());
  const auto* c = FindCheck(r, "add-class");
  ASSERT_NE(c, nullptr) << Describe(r);
  EXPECT_EQ(c->outcome, CheckOutcome::kFail);
  EXPECT_THAT(c->message, HasSubstr("in place != grow_classes only"));
  // The same code with the correct add_class (the built-in multinomial)
  // passes: EveryBuiltinPluginPasses.
}

// ABI 1.6: the frozen table must score as score() does.
TEST(PluginCheckTest, FrozenScoresThatDisagreeWithScoreFailFrozenScore) {
  PluginCheckReport r = Check(Fixture("check_frozen_drift"));
  EXPECT_FALSE(r.ok());
  const auto* c = FindCheck(r, "frozen-score");
  ASSERT_NE(c, nullptr) << Describe(r);
  EXPECT_EQ(c->outcome, CheckOutcome::kFail);
  EXPECT_THAT(c->message, HasSubstr("class 0: score_frozen"));
  EXPECT_THAT(c->message, HasSubstr("1e-9 relative"));
  // Everything else passes: only the frozen scores are wrong.
  EXPECT_EQ(r.Count(CheckOutcome::kFail), 1u) << Describe(r);
}

// ABI 1.7: the fused step must leave the model accumulate + apply + commit
// leave, bit for bit.
TEST(PluginCheckTest, FusedStepThatRoundsDifferentlyFailsFusedStep) {
  PluginCheckReport r = Check(Fixture("check_fused_drift"));
  EXPECT_FALSE(r.ok());
  const auto* c = FindCheck(r, "fused-step");
  ASSERT_NE(c, nullptr) << Describe(r);
  EXPECT_EQ(c->outcome, CheckOutcome::kFail);
  EXPECT_THAT(c->message, HasSubstr("ncll, after document"));
  EXPECT_THAT(c->message, HasSubstr("fused step vs accumulate + commit: raw["));
  // Everything else passes: only the fused step is wrong (the train-* checks
  // and the others run it too, and see a model that is merely rounded
  // differently).
  EXPECT_EQ(r.Count(CheckOutcome::kFail), 1u) << Describe(r);
}

TEST(PluginCheckTest, FileThatDoesNotLoadReportsTheLoadersReason) {
  PluginCheckReport r = Check(Fixture("abi_major_mismatch"));
  EXPECT_FALSE(r.loaded);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].name, "load");
  EXPECT_THAT(r.checks[0].message, HasSubstr("ABI major"));
}

TEST(PluginCheckTest, ThirdPartyLossReportsItsFacts) {
  PluginCheckReport r = Check(Fixture("good_loss"));
  ASSERT_TRUE(r.ok()) << Describe(r);
  EXPECT_EQ(r.kind, "loss");
  bool requires_label = false, lambda = false;
  for (const auto& [k, v] : r.info) {
    requires_label |= k == "requires_label";
    lambda |= k == "default_lambda";
  }
  EXPECT_TRUE(requires_label && lambda);
  for (const char* name : {"train-multinomial", "weights-finite", "weights-pure"}) {
    EXPECT_NE(FindCheck(r, name), nullptr) << name;
  }
}

// The program: text lines, --json, exit codes.
TEST(PluginCheckCliTest, ExitCodesAndOutput) {
  const std::string prog = testing::ProgramPath() + " plugin-check ";
  std::string out;
  const std::string multinomial = PluginRegistry::BuiltinPluginDir() + "/tributary_family_multinomial.so";
  ASSERT_EQ(testing::RunCommand(prog + multinomial, &out, true), 0) << out;
  EXPECT_THAT(out, HasSubstr("PASS rho0-noop"));
  EXPECT_THAT(out, HasSubstr("PASS snapshot-roundtrip"));
  EXPECT_THAT(out, HasSubstr("PASS concurrent-score"));
  EXPECT_THAT(out, HasSubstr("0 failed"));

  ASSERT_EQ(testing::RunCommand(prog + PluginRegistry::BuiltinPluginDir() + "/tributary_loss_hinge.so", &out, true), 0)
      << out;
  EXPECT_THAT(out, HasSubstr("INFO requires_label = true"));
  EXPECT_THAT(out, HasSubstr("PASS train-multinomial"));

  EXPECT_EQ(testing::RunCommand(prog + Fixture("check_stale_cache"), &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("FAIL cache-rebuild: incremental cache["));
  EXPECT_EQ(testing::RunCommand(prog + Fixture("check_rho0_drift"), &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("FAIL rho0-noop: after a step with rho = 0"));
  EXPECT_EQ(testing::RunCommand(prog + Fixture("check_nan_scores"), &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("FAIL train-nll"));
  EXPECT_EQ(testing::RunCommand(prog + Fixture("init_fails"), &out, true), 1) << out;
  EXPECT_THAT(out, HasSubstr("FAIL load: "));

  ASSERT_EQ(testing::RunCommand(prog + "--json " + Fixture("check_rho0_drift"), &out), 1) << out;
  json j = json::parse(out);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["name"], "check-rho0-drift");
  EXPECT_GE(j["failed"].get<int>(), 1);
  bool found = false;
  for (const auto& c : j["checks"]) found |= c["name"] == "rho0-noop" && c["result"] == "FAIL";
  EXPECT_TRUE(found) << out;

  EXPECT_EQ(testing::RunCommand(prog, &out, true), 2) << out;  // no PATH
  EXPECT_EQ(testing::RunCommand(prog + multinomial + " --no-such-flag", &out, true), 2) << out;
}

}  // namespace
}  // namespace tributary
