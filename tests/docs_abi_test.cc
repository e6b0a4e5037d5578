// The documents say the ABI version the header has: docs/plugins.md §3 (the
// history of minor versions, which plugin_abi.h points to instead of
// repeating) and docs/embedding.md ("1.N today"). A bump of TRIB_ABI_MINOR
// without its entry in the history fails here.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
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

// The "M.N" just before `suffix` in `text` ("" if none). (No std::regex: GCC
// 12 warns inside <regex> at -O1, which the sanitizer builds use.)
std::string VersionBefore(const std::string& text, const std::string& suffix) {
  const size_t at = text.find(suffix);
  if (at == std::string::npos) return "";
  size_t b = at;
  while (b > 0 && (std::isdigit(static_cast<unsigned char>(text[b - 1])) || text[b - 1] == '.')) --b;
  return text.substr(b, at - b);
}

TEST(DocsAbi, PluginsPageNamesTheHeadersVersionAndEveryMinorVersion) {
  const std::string page = Flatten(Read(std::string(TRIBUTARY_SOURCE_DIR) + "/docs/plugins.md"));
  ASSERT_FALSE(page.empty()) << "docs/plugins.md not found";
  const size_t s3 = page.find("## 3. ABI versions");
  ASSERT_NE(s3, std::string::npos) << "docs/plugins.md: no section '## 3. ABI versions'";
  const std::string section = page.substr(s3, page.find("## 4.", s3) - s3);
  const std::string today = VersionBefore(section, " today");
  ASSERT_FALSE(today.empty()) << "docs/plugins.md §3 does not say which version is current ('1.N today')";
  EXPECT_EQ(today, kHeaderVersion) << "docs/plugins.md §3 says " << today << " today, plugin_abi.h is "
                                   << kHeaderVersion;
  // Every minor version has its entry ("1.N appended ..." / "1.N added ...").
  for (unsigned minor = 1; minor <= TRIB_ABI_MINOR; ++minor) {
    const std::string v = std::to_string(TRIB_ABI_MAJOR) + "." + std::to_string(minor);
    EXPECT_TRUE(section.find(" " + v + " appended") != std::string::npos ||
                section.find(" " + v + " added") != std::string::npos)
        << "docs/plugins.md §3 has no entry for ABI " << v << " ('" << v << " appended ...')";
  }
}

TEST(DocsAbi, EmbeddingPageNamesTheHeadersVersion) {
  const std::string page = Flatten(Read(std::string(TRIBUTARY_SOURCE_DIR) + "/docs/embedding.md"));
  ASSERT_FALSE(page.empty()) << "docs/embedding.md not found";
  const size_t at = page.find("TRIB_ABI_MAJOR.MINOR`, ");
  ASSERT_NE(at, std::string::npos) << "docs/embedding.md does not name the ABI version";
  const std::string version = VersionBefore(page.substr(at), " today");
  EXPECT_EQ(version, kHeaderVersion) << "docs/embedding.md says " << version << ", plugin_abi.h is " << kHeaderVersion;
}

}  // namespace
