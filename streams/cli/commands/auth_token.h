// The secrets of `serve` and `client` (--auth-token-file). The client's file
// is its token (the file's contents without the line end); serve's holds its
// tokens, one per line, each with its scopes (ReadServeTokens).
#ifndef TRIBUTARY_STREAMS_CLI_COMMANDS_AUTH_TOKEN_H_
#define TRIBUTARY_STREAMS_CLI_COMMANDS_AUTH_TOKEN_H_

#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tributary/server.h"
#include "tributary/status.h"

namespace tributary::cli {

// Sets *token to the contents of the file `path` without trailing newlines,
// carriage returns and spaces (possibly empty). False, and *token empty,
// when the file cannot be opened.
inline bool ReadAuthToken(const std::string& path, std::string* token) {
  token->clear();
  std::ifstream in(path);
  if (!in) return false;
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  *token = std::move(s);
  return true;
}

// serve's token file: one token per line, alone (every scope) or followed
// by its scopes ("TOKEN predict", "TOKEN predict,learn", "TOKEN admin");
// blank lines and lines starting with '#' are skipped. (A file of one token,
// as before scopes, is that token with every scope.) The first token with
// every scope goes to *full, the others to *scoped. Errors name the file and
// the line: no token, a word that is no scope, a token given twice.
inline Status ReadServeTokens(const std::string& path, std::string* full, std::vector<ScopedToken>* scoped) {
  full->clear();
  scoped->clear();
  std::ifstream in(path);
  if (!in) return Status::NotFound("--auth-token-file '" + path + "': cannot open");
  std::string line;
  std::vector<std::pair<std::string, size_t>> seen;  // token, line
  for (size_t n = 1; std::getline(in, line); ++n) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t gap = line.find_first_of(" \t");
    const std::string token = line.substr(0, gap);
    std::string names = gap == std::string::npos ? std::string() : line.substr(line.find_first_not_of(" \t", gap));
    const std::string where = "--auth-token-file '" + path + "' line " + std::to_string(n);
    for (const auto& [t, at] : seen) {
      if (t == token) return Status::InvalidArgument(where + ": the same token as line " + std::to_string(at));
    }
    seen.emplace_back(token, n);
    uint32_t scopes = kScopeAll;
    if (!names.empty()) {
      auto parsed = ParseScopes(names);
      if (!parsed.ok()) return parsed.status().WithContext(where);
      scopes = *parsed;
    }
    if (scopes == kScopeAll && full->empty()) {
      *full = token;
    } else {
      scoped->push_back({token, scopes});
    }
  }
  if (full->empty() && scoped->empty()) {
    return Status::InvalidArgument("--auth-token-file '" + path + "' is empty (no token)");
  }
  return Status::OK();
}

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_COMMANDS_AUTH_TOKEN_H_
