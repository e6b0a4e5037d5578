// The documents say the ABI version the header has: docs/plugins.md §3 (the
// history of minor versions, which plugin_abi.h points to instead of
// repeating) and docs/embedding.md ("1.N today"). A bump of TRIB_ABI_MINOR
// without its entry in the history fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tributary/plugin_abi.h"

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Flatten(std::string s) {  // a line break inside a sentence reads as a space
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

const std::string kHeaderVersion = std::to_string(TRIB_ABI_MAJOR) + "." + std::to_string(TRIB_ABI_MINOR);

TEST(DocsAbi, PluginsPageNamesTheHeadersVersionAndEveryMinorVersion) {
  const std::string page = Flatten(Read(std::string(TRIBUTARY_SOURCE_DIR) + "/docs/plugins.md"));
  ASSERT_FALSE(page.empty()) << "docs/plugins.md not found";
  const size_t s3 = page.find("## 3. ABI versions");
  ASSERT_NE(s3, std::string::npos) << "docs/plugins.md: no section '## 3. ABI versions'";
  const std::string section = page.substr(s3, page.find("## 4.", s3) - s3);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(section, m, std::regex(R"(\b(\d+\.\d+) today)")))
      << "docs/plugins.md §3 does not say which version is current ('1.N today')";
  EXPECT_EQ(m[1].str(), kHeaderVersion) << "docs/plugins.md §3 says " << m[1] << " today, plugin_abi.h is "
                                        << kHeaderVersion;
  // Every minor version has its entry ("1.N appended ..." / "1.N added ...").
  for (unsigned minor = 1; minor <= TRIB_ABI_MINOR; ++minor) {
    const std::string v = std::to_string(TRIB_ABI_MAJOR) + "." + std::to_string(minor);
    EXPECT_TRUE(std::regex_search(
        section, std::regex("\\b" + std::regex_replace(v, std::regex("\\."), "\\.") + " (appended|added)")))
        << "docs/plugins.md §3 has no entry for ABI " << v << " ('" << v << " appended ...')";
  }
}

TEST(DocsAbi, EmbeddingPageNamesTheHeadersVersion) {
  const std::string page = Flatten(Read(std::string(TRIBUTARY_SOURCE_DIR) + "/docs/embedding.md"));
  ASSERT_FALSE(page.empty()) << "docs/embedding.md not found";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(page, m, std::regex(R"(TRIB_ABI_MAJOR\.MINOR`, (\d+\.\d+) today)")))
      << "docs/embedding.md does not say which ABI version is current";
  EXPECT_EQ(m[1].str(), kHeaderVersion) << "docs/embedding.md says " << m[1] << ", plugin_abi.h is " << kHeaderVersion;
}

}  // namespace
