// docs/embedding.md's code, compiled and run: the block between the markers
// below is the page's first C++ block, character for character (the test
// reads the page and compares), so the page cannot drift from code that
// builds and works.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tributary/input_document.h"
#include "tributary/live_model.h"
#include "tributary/model_config.h"
#include "tributary/plugin_registry.h"

namespace {

std::string Between(const std::string& text, const std::string& begin, const std::string& end) {
  const size_t b = text.find(begin);
  if (b == std::string::npos) return "";
  const size_t start = text.find('\n', b) + 1;
  const size_t e = text.find(end, start);
  return e == std::string::npos ? "" : text.substr(start, e - start);
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

#define TRIBUTARY_PLUGIN_DIR tributary::PluginRegistry::BuiltinPluginDir()

TEST(EmbeddingDoc, TheFirstExampleBuildsAndRuns) {
  // (Not formatted: the page's text, character for character.)
  // clang-format off
  // BEGIN docs/embedding.md
tributary::PluginRegistry registry({TRIBUTARY_PLUGIN_DIR});    // the installed built-in plugins
tributary::ModelConfig config;                                 // multinomial + ncll, the defaults
auto model = tributary::NewModel(config, registry, tributary::TextStreamSchema(), 0);
auto live = tributary::LiveModel::Create(std::move(model).value(), {});

tributary::InputDocument doc;                                  // learning thread
doc.AddText("Printer on fire again").SetLabel("urgent");
tributary::Status st = (*live)->Learn(doc);

auto reader = (*live)->NewReader();                            // each predicting thread
tributary::LivePrediction p;
doc.Clear();
doc.AddText("the printer is smoking");
st = (*reader)->Predict(doc, &p);                              // p.label, p.version, p.scores
  // END docs/embedding.md
  // clang-format on
  ASSERT_TRUE(st.ok()) << st.ToString();
  // One document learned and not yet published (publish_every 256): the
  // prediction is the initial model's, version 0, over the one class known
  // when it was published (none: the class came with the document).
  EXPECT_EQ(p.version, 0u);
  ASSERT_TRUE((*live)->Publish().ok());
  st = (*reader)->Predict(doc, &p);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(p.version, 1u);
  EXPECT_EQ(p.label, "urgent");

  // The page's block is the one above.
  const std::string page = Read(std::string(TRIBUTARY_SOURCE_DIR) + "/docs/embedding.md");
  const std::string block = Between(page, "## The three objects", "```\n\n");
  const std::string code = block.substr(block.find("tributary::PluginRegistry"));
  const std::string self = Between(Read(std::string(TRIBUTARY_SOURCE_DIR) + "/tests/embedding_doc_test.cc"),
                                   "// BEGIN docs/embedding.md", "  // END docs/embedding.md");
  EXPECT_EQ(code, self);
}

}  // namespace
