// The plugin SDK's declarative option tables (tributary/plugin_options.h):
// parsing typed values and defaults, the error messages, the table exported
// by the built-in plugins (ABI 1.3) and read back through the registry, and
// the agreement of every built-in's table with what its create() accepts.
#include "tributary/plugin_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"
#include "tributary/plugin_registry.h"
#include "tributary/plugin_sdk.h"

namespace tributary {
namespace {

namespace sdk = tributary::sdk;
using ::testing::HasSubstr;

constexpr trib_option_spec kDemo[] = {
    sdk::Number("prior", "1", "a pseudo-count").Above(0).Words("laplace|log"),
    sdk::Number("rate", "0.5", "a rate").AtLeast(0).Below(1),
    sdk::Integer("topics", "10", "number of topics").AtLeast(1).AtMost(100000),
    sdk::Integer("burn_in", "auto", "sweeps").AtLeast(0).Words("auto"),
    sdk::Boolean("share", "1", "share topics"),
    sdk::String("label", "none", "any text"),
    sdk::Choice("inference", "cvb0|vi|gibbs", "cvb0", "the local step"),
    sdk::Number("alpha", "1/K", "derived from topics").Above(0).Derived(),
    sdk::Integer("components", nullptr, "no default").AtLeast(1),
    sdk::Alias("eta", "prior"),
    {},
};
static_assert(sdk::ValidOptionTable(kDemo));

// Malformed tables are caught at compile time by TRIBUTARY_DEFINE_PLUGIN_OPTIONS.
constexpr trib_option_spec kNoEnd[] = {sdk::Number("a", "1", "")};
constexpr trib_option_spec kTwice[] = {sdk::Number("a", "1", ""), sdk::Number("a", "2", ""), {}};
constexpr trib_option_spec kBadName[] = {sdk::Number("Bad Name", "1", ""), {}};
constexpr trib_option_spec kDanglingAlias[] = {sdk::Alias("b", "a"), sdk::Number("a", "1", ""), {}};
constexpr trib_option_spec kEmptyChoice[] = {sdk::Choice("a", "", "", ""), {}};
constexpr trib_option_spec kEmpty[] = {{}};
static_assert(!sdk::ValidOptionTable(kNoEnd));
static_assert(!sdk::ValidOptionTable(kTwice));
static_assert(!sdk::ValidOptionTable(kBadName));
static_assert(!sdk::ValidOptionTable(kDanglingAlias));
static_assert(!sdk::ValidOptionTable(kEmptyChoice));
static_assert(sdk::ValidOptionTable(kEmpty));

struct Parsed {
  int rc = TRIB_OK;
  std::string message;
  sdk::OptionValues values;
};

Parsed Parse(const std::vector<trib_option>& opts, const trib_option_spec* table = kDemo) {
  Parsed p;
  trib_error err{};
  p.rc = sdk::ParseOptions(table, TRIB_KIND_FAMILY, "demo", opts.data(), opts.size(), &p.values, &err);
  if (p.rc != TRIB_OK) p.message = err.message;
  return p;
}

// "option k='v': expected ..." for one bad value.
std::string ErrorFor(const char* key, const char* value) {
  Parsed p = Parse({{key, value}});
  EXPECT_EQ(p.rc, TRIB_ERR_INVALID_ARGUMENT) << key << "=" << value;
  return p.message;
}

TEST(PluginOptionsTest, DefaultsForOptionsNotGiven) {
  Parsed p = Parse({});
  ASSERT_EQ(p.rc, TRIB_OK) << p.message;
  const auto& o = p.values;
  EXPECT_FALSE(o.IsSet("prior"));
  EXPECT_DOUBLE_EQ(o.Number("prior"), 1.0);
  EXPECT_DOUBLE_EQ(o.Number("rate"), 0.5);
  EXPECT_EQ(o.Integer<uint32_t>("topics"), 10u);
  EXPECT_TRUE(o.Is("burn_in", "auto"));
  EXPECT_TRUE(std::isnan(o.Number("burn_in")));
  EXPECT_TRUE(o.Flag("share"));
  EXPECT_EQ(o.Text("label"), "none");
  EXPECT_TRUE(o.Is("inference", "cvb0"));
  // A derived default ("1/K") and no default: no value until given.
  EXPECT_FALSE(o.HasValue("alpha"));
  EXPECT_FALSE(o.HasValue("components"));
  EXPECT_THROW(o.Number("alpha"), std::logic_error);
  EXPECT_EQ(o.Position("prior"), -1);
}

TEST(PluginOptionsTest, EachTypeParses) {
  Parsed p = Parse({{"prior", "2.5e-1"},
                    {"rate", "0"},
                    {"topics", "12"},
                    {"burn_in", "7"},
                    {"share", "false"},
                    {"label", "any text at all"},
                    {"inference", "gibbs"},
                    {"alpha", "0.01"},
                    {"components", "3.0"}});
  ASSERT_EQ(p.rc, TRIB_OK) << p.message;
  const auto& o = p.values;
  EXPECT_TRUE(o.IsSet("prior"));
  EXPECT_DOUBLE_EQ(o.Number("prior"), 0.25);
  EXPECT_DOUBLE_EQ(o.Number("rate"), 0.0);
  EXPECT_EQ(o.Integer<uint32_t>("topics"), 12u);
  EXPECT_EQ(o.Integer<uint64_t>("burn_in"), 7u);
  EXPECT_FALSE(o.Is("burn_in", "auto"));
  EXPECT_FALSE(o.Flag("share"));
  EXPECT_EQ(o.Text("label"), "any text at all");
  EXPECT_TRUE(o.Is("inference", "gibbs"));
  EXPECT_DOUBLE_EQ(o.Number("alpha"), 0.01);
  EXPECT_EQ(o.Integer<int>("components"), 3);  // an integral number is an integer
  EXPECT_EQ(o.Text("components"), "3.0");
  EXPECT_EQ(o.Position("inference"), 6);
  // Words of a number; the other boolean spellings.
  Parsed w = Parse({{"prior", "log"}, {"share", "0"}});
  ASSERT_EQ(w.rc, TRIB_OK) << w.message;
  EXPECT_TRUE(w.values.Is("prior", "log"));
  EXPECT_TRUE(std::isnan(w.values.Number("prior")));
  EXPECT_FALSE(w.values.Flag("share"));
  EXPECT_TRUE(Parse({{"share", "true"}}).values.Flag("share"));
}

TEST(PluginOptionsTest, LastValueAndAliasesWin) {
  Parsed p = Parse({{"prior", "2"}, {"topics", "3"}, {"eta", "4"}, {"topics", "5"}});
  ASSERT_EQ(p.rc, TRIB_OK) << p.message;
  EXPECT_DOUBLE_EQ(p.values.Number("prior"), 4.0);  // eta is an alias of prior
  EXPECT_DOUBLE_EQ(p.values.Number("eta"), 4.0);
  EXPECT_EQ(p.values.Integer<int>("topics"), 5);
  EXPECT_EQ(p.values.Position("prior"), 2);
}

TEST(PluginOptionsTest, OutOfRangeNamesTheOptionTheValueAndTheRange) {
  EXPECT_EQ(ErrorFor("prior", "0"), "option prior='0': expected laplace, log or a number > 0");
  EXPECT_EQ(ErrorFor("prior", "-1"), "option prior='-1': expected laplace, log or a number > 0");
  EXPECT_EQ(ErrorFor("rate", "1"), "option rate='1': expected a number >= 0 and < 1");
  EXPECT_EQ(ErrorFor("rate", "-0.1"), "option rate='-0.1': expected a number >= 0 and < 1");
  EXPECT_EQ(ErrorFor("topics", "0"), "option topics='0': expected an integer in [1, 100000]");
  EXPECT_EQ(ErrorFor("topics", "100001"), "option topics='100001': expected an integer in [1, 100000]");
  EXPECT_EQ(ErrorFor("burn_in", "-1"), "option burn_in='-1': expected auto or an integer >= 0");
}

TEST(PluginOptionsTest, MalformedValuesAreRefused) {
  for (const char* bad : {"", "abc", "1x", "nan", "inf", "1e400"}) {
    EXPECT_THAT(ErrorFor("prior", bad), HasSubstr(std::string("option prior='") + bad + "': expected")) << bad;
  }
  EXPECT_EQ(ErrorFor("topics", "2.5"), "option topics='2.5': expected an integer in [1, 100000]");
  EXPECT_EQ(ErrorFor("share", "yes"), "option share='yes': expected 0, 1, false or true");
  EXPECT_EQ(ErrorFor("alpha", "0"), "option alpha='0': expected a number > 0");
  // Through an alias the message names what was written.
  EXPECT_EQ(ErrorFor("eta", "x"), "option eta='x': expected laplace, log or a number > 0");
}

TEST(PluginOptionsTest, BadChoiceListsTheChoices) {
  EXPECT_EQ(ErrorFor("inference", "exact"), "option inference='exact': expected cvb0, vi or gibbs");
  EXPECT_EQ(ErrorFor("inference", "CVB0"), "option inference='CVB0': expected cvb0, vi or gibbs");
}

TEST(PluginOptionsTest, UnknownOptionNamesThePluginAndListsTheKnownNames) {
  Parsed p = Parse({{"topics", "3"}, {"colour", "red"}});
  EXPECT_EQ(p.rc, TRIB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(p.message,
            "unknown option 'colour' for family demo (known: prior, rate, topics, burn_in, share, label, inference, "
            "alpha, components, eta)");
  Parsed none = Parse({{"x", "1"}}, kEmpty);
  EXPECT_EQ(none.message, "unknown option 'x' for family demo (known: none)");
  trib_error err{};
  sdk::OptionValues v;
  const trib_option opt{"m", "1"};
  EXPECT_EQ(sdk::ParseOptions(kEmpty, TRIB_KIND_LOSS, "nll", &opt, 1, &v, &err), TRIB_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message, "unknown option 'm' for loss nll (known: none)");
}

TEST(PluginOptionsTest, ABadDefaultIsThePluginsBug) {
  constexpr trib_option_spec kBadDefault[] = {sdk::Integer("k", "ten", "").AtLeast(1), {}};
  Parsed p = Parse({}, kBadDefault);
  EXPECT_EQ(p.rc, TRIB_ERR_INTERNAL);
  EXPECT_THAT(p.message, HasSubstr("the default 'ten' of option k is not an integer >= 1"));
}

TEST(PluginOptionsTest, MisuseInThePluginThrowsLogicError) {
  Parsed p = Parse({});
  ASSERT_EQ(p.rc, TRIB_OK);
  EXPECT_THROW(p.values.Number("no_such_option"), std::logic_error);
  EXPECT_THROW(p.values.Flag("prior"), std::logic_error);            // a number, not a boolean
  EXPECT_THROW(p.values.Integer<int>("burn_in"), std::logic_error);  // the word "auto"
  constexpr trib_option_spec kBig[] = {sdk::Integer("n", "70000", "").AtLeast(0), {}};
  Parsed big = Parse({}, kBig);
  EXPECT_THROW(big.values.Integer<uint16_t>("n"), std::logic_error);  // does not fit
  // Guard turns the exception into TRIB_ERR_INTERNAL with its message.
  trib_error err{};
  EXPECT_EQ(sdk::Guard(&err, [&] { return static_cast<int>(p.values.Number("no_such_option")); }), TRIB_ERR_INTERNAL);
  EXPECT_THAT(err.message, HasSubstr("no option 'no_such_option'"));
}

TEST(PluginOptionsTest, NumbersAreWrittenAsPeopleWriteThem) {
  EXPECT_EQ(sdk::FormatOptionNumber(1), "1");
  EXPECT_EQ(sdk::FormatOptionNumber(100000), "100000");
  EXPECT_EQ(sdk::FormatOptionNumber(0.5), "0.5");
  EXPECT_EQ(sdk::FormatOptionNumber(1e100), "1e100");
  EXPECT_EQ(sdk::FormatOptionNumber(1e-5), "1e-5");
  EXPECT_EQ(sdk::FormatOptionNumber(1e12), "1e12");
}

// ---- The tables of the built-in plugins, through the registry -------------------

TEST(PluginOptionsTest, BuiltinTableIsExportedAndReadBackThroughTheRegistry) {
  auto r = testing::BuiltinRegistry().Find("multinomial", TRIB_KIND_FAMILY);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Plugin& p = **r;
  EXPECT_GE(p.abi_minor, 3u);  // built against the host's ABI (>= 1.3, the table's)
  ASSERT_TRUE(p.has_option_table());
  std::vector<std::string> names;
  for (const auto& o : p.options()) names.push_back(o.name);
  EXPECT_EQ(names, (std::vector<std::string>{"prior", "class_prior", "floor"}));
  const OptionSpec* prior = p.FindOption("prior");
  ASSERT_NE(prior, nullptr);
  EXPECT_EQ(prior->type, TRIB_OPTION_NUMBER);
  EXPECT_STREQ(prior->type_name(), "number");
  EXPECT_TRUE(prior->has_default);
  EXPECT_EQ(prior->default_value, "1");
  EXPECT_EQ(prior->min, 0.0);
  EXPECT_TRUE(std::isinf(prior->max));
  EXPECT_EQ(prior->choices, (std::vector<std::string>{"laplace", "log"}));
  EXPECT_EQ(prior->range(), "> 0, or laplace|log");
  EXPECT_EQ(prior->expected(), "laplace, log or a number > 0");
  EXPECT_FALSE(prior->help.empty());
  const OptionSpec* floor = p.FindOption("floor");
  ASSERT_NE(floor, nullptr);
  EXPECT_EQ(floor->type, TRIB_OPTION_CHOICE);
  EXPECT_EQ(floor->choices, (std::vector<std::string>{"paper", "prior"}));
  EXPECT_EQ(floor->default_value, "paper");
  EXPECT_EQ(p.FindOption("colour"), nullptr);
  // An alias resolves to its option.
  auto lda = testing::BuiltinRegistry().Find("lda", TRIB_KIND_FAMILY);
  ASSERT_TRUE(lda.ok());
  ASSERT_NE((*lda)->FindOption("prior"), nullptr);
  EXPECT_EQ((*lda)->FindOption("prior")->name, "eta");
  EXPECT_TRUE((*lda)->FindOption("alpha")->derived_default());
  EXPECT_EQ((*lda)->FindOption("alpha")->default_value, "1/K");
  // A loss without options exports an empty table.
  auto ncll = testing::BuiltinRegistry().Find("ncll", TRIB_KIND_LOSS);
  ASSERT_TRUE(ncll.ok());
  EXPECT_TRUE((*ncll)->has_option_table());
  EXPECT_TRUE((*ncll)->options().empty());
}

TEST(PluginOptionsTest, EveryBuiltinHasATable) {
  for (const auto& p : testing::BuiltinRegistry().plugins()) {
    EXPECT_TRUE(p->has_option_table()) << p->name;
    for (const auto& o : p->options()) EXPECT_TRUE(o.is_alias() || !o.help.empty()) << p->name << " " << o.name;
  }
}

TEST(PluginOptionsTest, PluginsWithoutATableStillLoad) {
  // Built for ABI 1.0 (no symbol possible) and for 1.3 without one.
  for (const char* fixture : {"old_minor_loss", "good_loss"}) {
    auto r = LoadPluginFile(std::string(TRIBUTARY_FIXTURE_PLUGIN_DIR) + "/" + fixture + ".so", TRIB_KIND_LOSS);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE((*r)->has_option_table()) << fixture;
    EXPECT_TRUE((*r)->options().empty());
  }
}

TEST(PluginOptionsTest, MalformedTableRefusesThePlugin) {
  auto r = LoadPluginFile(std::string(TRIBUTARY_FIXTURE_PLUGIN_DIR) + "/bad_option_table.so", TRIB_KIND_LOSS);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("bad_option_table.so"));
  EXPECT_THAT(r.status().message(), HasSubstr("malformed option table 'tributary_plugin_options'"));
  EXPECT_THAT(r.status().message(), HasSubstr("entry 1 ('margin'): option named twice"));
}

// A schema every built-in family can model: terms, classes, REAL and
// categorical features.
struct AnySchema {
  uint32_t real_kinds[2] = {TRIB_FEATURE_REAL, TRIB_FEATURE_REAL};
  uint32_t cards[1] = {3};
  trib_schema schema{sizeof(trib_schema), 20, 2, 2, 1, cards, real_kinds, 0, 0};
};

// Runs the plugin's create with `opts`; "" on success, else the message.
std::string Create(const Plugin& p, const std::vector<trib_option>& opts) {
  trib_error err{};
  if (p.kind == TRIB_KIND_FAMILY) {
    AnySchema s;
    trib_family_model* m = nullptr;
    const int rc = p.family().create(&s.schema, opts.data(), opts.size(), &m, &err);
    if (rc != TRIB_OK) return err.message[0] ? err.message : "error without a message";
    p.family().destroy(m);
    return "";
  }
  if (p.loss().create == nullptr) return opts.empty() ? "" : "takes no options";
  trib_loss_model* m = nullptr;
  const int rc = p.loss().create(opts.data(), opts.size(), &m, &err);
  if (rc != TRIB_OK) return err.message[0] ? err.message : "error without a message";
  p.loss().destroy(m);
  return "";
}

// What each built-in's table says is what its create() does: every default
// written out is accepted, a value just outside each range and a word outside
// each choice are refused with the table's own "expected ...", and an unknown
// key lists the table's names. The raw table also parses with the SDK.
TEST(PluginOptionsTest, EveryBuiltinCreateAgreesWithItsTable) {
  size_t plugins = 0, refusals = 0;
  for (const auto& p : testing::BuiltinRegistry().plugins()) {
    ++plugins;
    SCOPED_TRACE(std::string(KindName(p->kind)) + " " + p->name);
    ASSERT_TRUE(p->has_option_table());
    // The exported table itself, as the plugin's own ParseOptions reads it.
    void* h = dlopen(p->path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    ASSERT_NE(h, nullptr);
    const auto* table = static_cast<const trib_option_table*>(dlsym(h, TRIB_PLUGIN_OPTIONS_SYMBOL));
    ASSERT_NE(table, nullptr);
    sdk::OptionValues values;
    trib_error err{};
    EXPECT_EQ(sdk::ParseOptions(table->specs, p->kind, p->name.c_str(), nullptr, 0, &values, &err), TRIB_OK)
        << err.message;
    dlclose(h);

    EXPECT_EQ(Create(*p, {}), "");
    std::vector<trib_option> defaults;
    for (const auto& o : p->options()) {
      if (!o.is_alias() && o.has_default && !o.derived_default()) {
        defaults.push_back({o.name.c_str(), o.default_value.c_str()});
      }
    }
    EXPECT_EQ(Create(*p, defaults), "");
    std::string known;
    for (const auto& o : p->options()) known += (known.empty() ? "" : ", ") + o.name;
    if (p->kind == TRIB_KIND_FAMILY || p->loss().create != nullptr) {
      EXPECT_EQ(Create(*p, {{"colour", "red"}}), "unknown option 'colour' for " + std::string(KindName(p->kind)) + " " +
                                                     p->name + " (known: " + (known.empty() ? "none" : known) + ")");
    }
    for (const auto& o : p->options()) {
      std::vector<std::string> bad;
      if (o.type == TRIB_OPTION_NUMBER || o.type == TRIB_OPTION_INTEGER) {
        if (std::isfinite(o.min))
          bad.push_back(sdk::FormatOptionNumber((o.flags & TRIB_OPTION_MIN_EXCLUSIVE) ? o.min : o.min - 1));
        if (std::isfinite(o.max))
          bad.push_back(sdk::FormatOptionNumber((o.flags & TRIB_OPTION_MAX_EXCLUSIVE) ? o.max : o.max * 2 + 1));
        bad.push_back("not-a-number");
      } else if (o.type == TRIB_OPTION_CHOICE || o.type == TRIB_OPTION_BOOLEAN) {
        bad.push_back("no-such-choice");
      }
      for (const auto& v : bad) {
        ++refusals;
        EXPECT_EQ(Create(*p, {{o.name.c_str(), v.c_str()}}),
                  "option " + o.name + "='" + v + "': expected " + o.expected());
      }
    }
  }
  EXPECT_EQ(plugins, 13u);  // 10 families (lgda the tenth), 3 losses
  EXPECT_GT(refusals, 100u);
}

}  // namespace
}  // namespace tributary
