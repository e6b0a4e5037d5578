// Helpers shared by the tests.
#ifndef TRIBUTARY_TESTS_TEST_UTIL_H_
#define TRIBUTARY_TESTS_TEST_UTIL_H_

#include <sys/types.h>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary::testing {

// Registry over the built-in plugin directory of this build, scanned.
const PluginRegistry& BuiltinRegistry();
std::shared_ptr<const Plugin> BuiltinFamily(const std::string& name);
std::shared_ptr<const Plugin> BuiltinLoss(const std::string& name);

// A schema with `vocab` terms named t0..t{vocab-1} and `classes` classes c0...
v1::Schema TextSchema(uint32_t vocab, uint32_t classes);
// A schema with `reals` REAL features (x0...) and `classes` classes.
v1::Schema RealSchema(uint32_t reals, uint32_t classes);

// A fresh empty directory under the test temp dir, removed at exit.
std::string TempDir(const std::string& name);

// The whole file (empty if it cannot be read) / replaces it with `data`.
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& data);

// A snapshot file's bytes with its ModelSnapshot payload edited by `edit`
// and the header's length and the CRC recomputed, so that Load sees a
// well-formed file with the edited content (empty if `file` does not parse).
std::string ResealSnapshot(const std::string& file, const std::function<void(v1::ModelSnapshot*)>& edit);

// Builds a DocumentBuffer from (term, count) pairs.
DocumentBuffer MakeDoc(uint64_t index, int64_t label, const std::vector<std::pair<uint32_t, double>>& terms);

// Fraction of `docs` whose argmax of log p(k, x) under `m` is their label
// (scoring failures are test failures).
double Accuracy(const Model& m, const std::vector<DocumentBuffer>& docs);

// Path of the built program (build/bin/tributary).
std::string ProgramPath();
// Runs a shell command; returns its exit status and fills stdout (stderr merged when merge_stderr).
int RunCommand(const std::string& cmd, std::string* output, bool merge_stderr = false);
// One HTTP/1.1 request to 127.0.0.1:`port` on a connection of its own
// (Connection: close), read to the end. status 0: no answer.
struct HttpAnswer {
  int status = 0;
  std::string body;
};
HttpAnswer HttpCall(uint16_t port, const std::string& method, const std::string& target, const std::string& body = "",
                    const std::string& token = "");
// Starts `tributary serve ARGS... --port-file PORT_FILE` (the built program)
// in a child process and waits until it wrote its ports (up to 10 s): its
// pid (0 when it could not be started), *port and *http_port (0: not
// written in time).
pid_t SpawnServe(const std::vector<std::string>& args, const std::string& port_file, uint16_t* port,
                 uint16_t* http_port);
// GET /metrics from a server's HTTP port on 127.0.0.1: each sample line
// (name with labels) -> value. Empty when the server cannot be reached.
std::map<std::string, double> HttpMetrics(uint16_t port);

}  // namespace tributary::testing

#endif  // TRIBUTARY_TESTS_TEST_UTIL_H_
