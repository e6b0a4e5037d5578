#include "test_util.h"

#include <arpa/inet.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tributary/checksum.h"

extern char** environ;

namespace tributary::testing {

const PluginRegistry& BuiltinRegistry() {
  static PluginRegistry* reg = [] {
    auto* r = new PluginRegistry(std::vector<std::string>{PluginRegistry::BuiltinPluginDir()}, true);
    r->Scan();
    return r;
  }();
  return *reg;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::string ResealSnapshot(const std::string& file, const std::function<void(v1::ModelSnapshot*)>& edit) {
  constexpr size_t kHeader = 8 + 4 + 8;  // magic, format version, payload length
  v1::ModelSnapshot snap;
  if (file.size() < kHeader + 4 || !snap.ParseFromString(file.substr(kHeader, file.size() - kHeader - 4))) return "";
  edit(&snap);
  const std::string payload = snap.SerializeAsString();
  std::string sealed = file.substr(0, 12);
  for (int i = 0; i < 8; ++i) sealed.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xff));
  sealed += payload;
  const uint32_t crc = Crc32(payload.data(), payload.size());
  for (int i = 0; i < 4; ++i) sealed.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return sealed;
}

std::shared_ptr<const Plugin> BuiltinFamily(const std::string& name) {
  auto r = BuiltinRegistry().Find(name, TRIB_KIND_FAMILY);
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
  return *r;
}

std::shared_ptr<const Plugin> BuiltinLoss(const std::string& name) {
  auto r = BuiltinRegistry().Find(name, TRIB_KIND_LOSS);
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
  return *r;
}

v1::Schema TextSchema(uint32_t vocab, uint32_t classes) {
  v1::Schema s;
  for (uint32_t i = 0; i < vocab; ++i) s.add_vocabulary("t" + std::to_string(i));
  for (uint32_t k = 0; k < classes; ++k) s.add_class_names("c" + std::to_string(k));
  return s;
}

v1::Schema RealSchema(uint32_t reals, uint32_t classes) {
  v1::Schema s;
  for (uint32_t i = 0; i < reals; ++i) {
    auto* f = s.add_features();
    f->set_name("x" + std::to_string(i));
    f->set_kind(v1::FeatureSpec::REAL);
  }
  for (uint32_t k = 0; k < classes; ++k) s.add_class_names("c" + std::to_string(k));
  return s;
}

std::string TempDir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / ("tributary_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  static bool registered = [] {
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(
          std::filesystem::temp_directory_path() / ("tributary_test_" + std::to_string(::getpid())), ec);
    });
    return true;
  }();
  (void)registered;
  return p.string();
}

DocumentBuffer MakeDoc(uint64_t index, int64_t label, const std::vector<std::pair<uint32_t, double>>& terms) {
  DocumentBuffer d;
  d.index = index;
  d.id = "d" + std::to_string(index);
  d.label = label;
  for (const auto& [t, c] : terms) {
    d.term_ids.push_back(t);
    d.term_counts.push_back(c);
  }
  d.Canonicalize();
  return d;
}

double Accuracy(const Model& m, const std::vector<DocumentBuffer>& docs) {
  auto state = m.NewScoringState();
  EXPECT_TRUE(state.ok());
  if (!state.ok()) return 0;
  std::vector<double> s(m.num_outputs());
  size_t right = 0;
  for (const auto& d : docs) {
    EXPECT_TRUE(m.Score(d.View(), state->get(), s.data()).ok());
    right += static_cast<int64_t>(std::max_element(s.begin(), s.end()) - s.begin()) == d.label;
  }
  return static_cast<double>(right) / static_cast<double>(docs.size());
}

std::string ProgramPath() { return std::string(TRIBUTARY_BINARY_DIR) + "/bin/tributary"; }

int RunCommand(const std::string& cmd, std::string* output, bool merge_stderr) {
  std::string full = cmd + (merge_stderr ? " 2>&1" : "");
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  if (output) output->clear();
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) {
    if (output) output->append(buf, n);
  }
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

HttpAnswer HttpCall(uint16_t port, const std::string& method, const std::string& target, const std::string& body,
                    const std::string& token) {
  HttpAnswer out;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return out;
  }
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty()) req += "Content-Type: application/json\r\n";
  req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  size_t off = 0;
  while (off < req.size()) {
    const ssize_t n = send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      close(fd);
      return out;
    }
    off += static_cast<size_t>(n);
  }
  std::string text;
  char buf[8192];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t head = text.find("\r\n\r\n");
  if (text.size() < 12 || text.compare(0, 5, "HTTP/") != 0 || head == std::string::npos) return out;
  out.status = std::atoi(text.c_str() + 9);
  out.body = text.substr(head + 4);
  return out;
}

pid_t SpawnServe(const std::vector<std::string>& args, const std::string& port_file, uint16_t* port,
                 uint16_t* http_port) {
  *port = *http_port = 0;
  std::filesystem::remove(port_file);
  std::vector<std::string> all = {ProgramPath(), "serve"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--port-file");
  all.push_back(port_file);
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return 0;
  for (int i = 0; i < 400; ++i) {
    std::ifstream in(port_file);
    unsigned p = 0, h = 0;
    if (in >> p >> h) {
      *port = static_cast<uint16_t>(p);
      *http_port = static_cast<uint16_t>(h);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return pid;
}

// GET /metrics from the server's HTTP port: metric line -> value.
std::map<std::string, double> HttpMetrics(uint16_t port) {
  std::map<std::string, double> out;
  const HttpAnswer answer = HttpCall(port, "GET", "/metrics");
  const std::string& text = answer.body;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    out[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

}  // namespace tributary::testing
