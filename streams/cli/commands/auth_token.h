// The shared secret of `serve` and `client` (--auth-token-file): the file's
// contents without the line end.
#ifndef TRIBUTARY_STREAMS_CLI_COMMANDS_AUTH_TOKEN_H_
#define TRIBUTARY_STREAMS_CLI_COMMANDS_AUTH_TOKEN_H_

#include <fstream>
#include <iterator>
#include <string>
#include <utility>

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

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_COMMANDS_AUTH_TOKEN_H_
