// Plugin loading with real shared objects, including deliberately broken ones
// (tests/fixtures/plugins). Every refusal must name the file and the problem
// and must not crash the host.
#include "tributary/plugin_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "test_util.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& name) { return std::string(TRIBUTARY_FIXTURE_PLUGIN_DIR) + "/" + name + ".so"; }

TEST(PluginRegistryTest, BuiltinsAreFoundWithMetadata) {
  const auto& reg = testing::BuiltinRegistry();
  for (const char* name : {"multinomial"}) {
    auto r = reg.Find(name, TRIB_KIND_FAMILY);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->name, name);
    EXPECT_TRUE((*r)->builtin);
    EXPECT_EQ((*r)->abi_major, TRIB_ABI_MAJOR);
    EXPECT_FALSE((*r)->version.empty());
  }
  for (const char* name : {"nll", "ncll", "hinge"}) {
    auto r = reg.Find(name, TRIB_KIND_LOSS);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->kind, TRIB_KIND_LOSS);
  }
  EXPECT_TRUE(reg.refused().empty()) << reg.refused().front().path << ": " << reg.refused().front().reason;
}

// The process's registry (embedders, the program): one instance, made once
// even when many threads ask at once, over the built-in directory next to the
// program (the build tree mirrors the install tree), each plugin loaded once.
TEST(PluginRegistryTest, TheDefaultRegistryIsOneAndFindsTheBuiltins) {
  std::vector<const PluginRegistry*> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&seen, i] { seen[i] = &PluginRegistry::Default(); });
  for (auto& t : threads) t.join();
  for (const PluginRegistry* r : seen) EXPECT_EQ(r, seen[0]);
  const PluginRegistry& reg = PluginRegistry::Default();
  EXPECT_EQ(reg.search_path().front(), PluginRegistry::BuiltinPluginDir());
  auto a = reg.Find("multinomial", TRIB_KIND_FAMILY);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE((*a)->builtin);
  auto b = PluginRegistry::Default().Find("multinomial", TRIB_KIND_FAMILY);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get());  // loaded once
}

TEST(PluginRegistryTest, UnknownNameListsAvailable) {
  auto r = testing::BuiltinRegistry().Find("no-such-family", TRIB_KIND_FAMILY);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_THAT(r.status().message(), HasSubstr("no-such-family"));
  EXPECT_THAT(r.status().message(), HasSubstr("multinomial"));
}

TEST(PluginRegistryTest, MissingFileIsNotFound) {
  auto r = LoadPluginFile("/nonexistent/dir/plugin.so", TRIB_KIND_LOSS);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/dir/plugin.so"));
}

struct BrokenCase {
  const char* fixture;
  const char* expect;  // substring of the reason
};

// The host's ABI version as the refusal messages print it.
const std::string kHostAbi = "1." + std::to_string(TRIB_ABI_MINOR);
const std::string kMajorMismatch = "ABI major version mismatch: host has " + kHostAbi + ", plugin was built for 2.0";
const std::string kMinorNewer = "needs ABI 1." + std::to_string(TRIB_ABI_MINOR + 1) + " but host has only " + kHostAbi;

class BrokenPluginTest : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenPluginTest, RefusedWithReasonNamingTheFile) {
  const auto& c = GetParam();
  std::string path = Fixture(c.fixture);
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  auto r = LoadPluginFile(path, TRIB_KIND_LOSS);
  ASSERT_FALSE(r.ok()) << c.fixture << " should have been refused";
  EXPECT_THAT(r.status().message(), HasSubstr(c.fixture));
  EXPECT_THAT(r.status().message(), HasSubstr(c.expect));
  // Refused before the plugin's init ran, where the fixture's init would say so.
  if (std::string(c.fixture) != "init_fails") {
    EXPECT_THAT(r.status().message(), ::testing::Not(HasSubstr("init ran")));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, BrokenPluginTest,
    ::testing::Values(BrokenCase{"abi_major_mismatch", kMajorMismatch.c_str()},
                      BrokenCase{"abi_minor_newer", kMinorNewer.c_str()},
                      BrokenCase{"missing_entry", "missing entry point 'tributary_plugin_init'"},
                      BrokenCase{"missing_info", "missing symbol 'tributary_plugin_info'"},
                      BrokenCase{"bad_magic", "bad magic"},
                      BrokenCase{"init_fails", "initialisation failed (code 1): license file /nonexistent not found"}),
    [](const ::testing::TestParamInfo<BrokenCase>& p) { return std::string(p.param.fixture); });

TEST(PluginRegistryTest, OlderMinorVersionAccepted) {
  // Built for ABI 1.0 with the 1.0 vtable size: the host zero-extends it.
  auto r = LoadPluginFile(Fixture("old_minor_loss"), TRIB_KIND_LOSS);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->abi_minor, 0u);
  EXPECT_NE((*r)->loss().weights, nullptr);
}

TEST(PluginRegistryTest, IncompleteVtableRefused) {
  auto r = LoadPluginFile(Fixture("incomplete_family"), TRIB_KIND_FAMILY);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("lacks required function 'create'"));
}

// ABI 1.6: freeze, frozen_destroy and score_frozen go together.
TEST(PluginRegistryTest, FamilyWithPartOfTheFrozenHooksRefused) {
  auto r = LoadPluginFile(Fixture("frozen_incomplete"), TRIB_KIND_FAMILY);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("lacks 'score_frozen' (the three go together)"));
}

TEST(PluginRegistryTest, WrongKindRefused) {
  auto r = LoadPluginFile(Fixture("good_loss"), TRIB_KIND_FAMILY);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is a loss plugin ('double-ncll'), expected a family"));
}

TEST(PluginRegistryTest, GarbageFileRefused) {
  std::string dir = testing::TempDir("garbage_plugin");
  std::string path = dir + "/garbage.so";
  std::ofstream(path) << "this is not an ELF file at all";
  auto r = LoadPluginFile(path, TRIB_KIND_FAMILY);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsPluginError());
  EXPECT_THAT(r.status().message(), HasSubstr("garbage.so"));
  EXPECT_THAT(r.status().message(), HasSubstr("cannot be loaded"));
}

TEST(PluginRegistryTest, ScanReportsRefusedAndThirdPartyPlugins) {
  PluginRegistry reg({PluginRegistry::BuiltinPluginDir(), TRIBUTARY_FIXTURE_PLUGIN_DIR}, true);
  reg.Scan();
  // The good third-party loss is found by name.
  auto good = reg.Find("double-ncll", TRIB_KIND_LOSS);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_FALSE((*good)->builtin);
  EXPECT_EQ((*good)->version, "0.3.0");
  // Each broken fixture is listed with its reason.
  auto refused_reason = [&](const std::string& fixture) -> std::string {
    for (const auto& r : reg.refused())
      if (r.path.find("/" + fixture + ".so") != std::string::npos) return r.reason;
    return "";
  };
  EXPECT_THAT(refused_reason("abi_major_mismatch"), HasSubstr("ABI major"));
  EXPECT_THAT(refused_reason("init_fails"), HasSubstr("initialisation failed"));
  EXPECT_THAT(refused_reason("missing_info"), HasSubstr("missing symbol"));
  // The impostor "nll" collides with the built-in: the built-in wins by name,
  // the impostor is reported, and it is still loadable by path.
  EXPECT_THAT(refused_reason("shadow_nll"), HasSubstr("already taken by built-in"));
  auto nll = reg.Find("nll", TRIB_KIND_LOSS);
  ASSERT_TRUE(nll.ok());
  EXPECT_TRUE((*nll)->builtin);
  EXPECT_NE((*nll)->version, "6.6.6");
  auto by_path = reg.Find(Fixture("shadow_nll"), TRIB_KIND_LOSS);
  ASSERT_TRUE(by_path.ok()) << by_path.status().ToString();
  EXPECT_EQ((*by_path)->version, "6.6.6");
}

// Plugins are loaded only when named: a lookup by name loads the file the
// name points to and nothing else (no third-party file is even probed);
// asking for the whole list loads everything.
TEST(PluginRegistryTest, LookupByNameLoadsOnlyThatFile) {
  PluginRegistry reg({PluginRegistry::BuiltinPluginDir(), TRIBUTARY_FIXTURE_PLUGIN_DIR}, true);
  auto fam = reg.Find("multinomial", TRIB_KIND_FAMILY);
  ASSERT_TRUE(fam.ok()) << fam.status().ToString();
  EXPECT_TRUE((*fam)->builtin);
  ASSERT_EQ(reg.loaded_files().size(), 1u);
  EXPECT_THAT(reg.loaded_files()[0], HasSubstr("tributary_family_multinomial.so"));
  auto loss = reg.Find("nll", TRIB_KIND_LOSS);  // the built-in, not the impostor in the fixtures
  ASSERT_TRUE(loss.ok());
  EXPECT_TRUE((*loss)->builtin);
  EXPECT_EQ(reg.loaded_files().size(), 2u);
  // A name no file is called after: every file is looked inside, in order.
  auto third = reg.Find("double-ncll", TRIB_KIND_LOSS);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_GT(reg.loaded_files().size(), 10u);
  bool init_fails_listed = false;
  for (const auto& r : reg.refused()) init_fails_listed |= r.path.find("init_fails.so") != std::string::npos;
  EXPECT_TRUE(init_fails_listed);
  // The full list keeps the search path's order: built-ins first.
  ASSERT_FALSE(reg.plugins().empty());
  EXPECT_TRUE(reg.plugins().front()->builtin);
  EXPECT_FALSE(reg.plugins().back()->builtin);
}

// What a model file names is looked up by name only: never a path.
TEST(PluginRegistryTest, FindByNameRefusesPaths) {
  const PluginRegistry& reg = testing::BuiltinRegistry();
  for (const std::string& name : {std::string(TRIBUTARY_FIXTURE_PLUGIN_DIR) + "/good_loss.so", std::string("x.so"),
                                  std::string("../tributary_loss_nll"), std::string()}) {
    auto r = reg.FindByName(name, TRIB_KIND_LOSS);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_THAT(r.status().message(), HasSubstr("is not a plugin name")) << name;
  }
  EXPECT_TRUE(reg.FindByName("nll", TRIB_KIND_LOSS).ok());
}

TEST(PluginRegistryTest, EnvironmentPathIsSearched) {
  ::setenv("TRIBUTARY_PLUGIN_PATH", "/nonexistent:" TRIBUTARY_FIXTURE_PLUGIN_DIR, 1);
  auto dirs = PluginRegistry::DefaultSearchPath();
  ::unsetenv("TRIBUTARY_PLUGIN_PATH");
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], PluginRegistry::BuiltinPluginDir());
  EXPECT_EQ(dirs[2], TRIBUTARY_FIXTURE_PLUGIN_DIR);
}

}  // namespace
}  // namespace tributary
