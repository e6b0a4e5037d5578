#include "live_output.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

namespace tributary::cli {
namespace {

volatile sig_atomic_t g_received = 0;
// The descriptor the input is read from (-1: a regular file, which never
// blocks) and /dev/null, opened before any signal.
volatile sig_atomic_t g_input_fd = -1;
volatile sig_atomic_t g_null_fd = -1;
bool g_installed = false;

extern "C" void OnStopSignal(int sig) {
  if (g_received == 0) g_received = sig;
  // End the input where it is (live_output.h): async-signal-safe calls only.
  if (g_input_fd >= 0 && g_null_fd >= 0) (void)::dup2(g_null_fd, g_input_fd);
}

// The descriptor this process reads `in` from, or -1 when `in` is a regular
// file or is not found open.
int InputDescriptor(const std::string& in) {
  if (in == "-") return 0;
  struct stat want;
  if (::stat(in.c_str(), &want) != 0 || S_ISREG(want.st_mode)) return -1;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int found = -1;
  const int self = ::dirfd(d);
  while (struct dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == self) continue;
    struct stat have;
    if (::fstat(static_cast<int>(fd), &have) == 0 && have.st_dev == want.st_dev && have.st_ino == want.st_ino) {
      found = static_cast<int>(fd);
      break;
    }
  }
  ::closedir(d);
  return found;
}

}  // namespace

void StopSignals::Install(const std::string& in) {
  if (!IsLiveInput(in)) return;  // a file ends by itself: a signal keeps its default effect
  g_input_fd = InputDescriptor(in);
  if (g_installed) return;
  g_installed = true;
  g_null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old;
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // nohup: stays ignored
    struct sigaction sa = {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    (void)::sigaction(sig, &sa, nullptr);
  }
}

int StopSignals::Received() { return g_received; }

std::string StopSignals::Name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(sig);
  }
}

void AddSaveFlags(CLI::App* cmd, LearnFlags* flags) {
  cmd->add_option("--save-every", flags->save_every,
                  "while learning, also save --out every N documents (atomically; 0: not by documents)")
      ->capture_default_str();
  cmd->add_option("--save-interval", flags->save_interval,
                  "while learning, also save --out every S seconds (atomically; 0: only at the end). Default: "
                  "300 for a live input (standard input, a FIFO), 0 for a file. SIGINT/SIGTERM/SIGHUP end the "
                  "stream where it is and save --out before exiting")
      ->check(CLI::NonNegativeNumber);
}

Checkpoints::Checkpoints(const LearnFlags& flags, const std::string& in, std::string out)
    : out_(std::move(out)),
      every_(flags.save_every),
      interval_(flags.save_interval >= 0 ? flags.save_interval : (IsLiveInput(in) ? kDefaultLiveInterval : 0)),
      last_time_(std::chrono::steady_clock::now()) {}

void Checkpoints::After(uint64_t documents, const std::function<Status(const std::string& path)>& save) {
  if (out_.empty() || documents == last_documents_) return;
  bool due = every_ > 0 && documents - last_documents_ >= every_;
  const auto now = std::chrono::steady_clock::now();
  if (!due && interval_ > 0) due = std::chrono::duration<double>(now - last_time_).count() >= interval_;
  if (!due) return;
  Status st = save(out_);
  // Tried again at the next due point either way (not at every document).
  last_documents_ = documents;
  last_time_ = now;
  if (st.ok()) {
    ++saves_;
    if (failing_) std::cerr << "tributary: saving " << out_ << " works again" << std::endl;
    failing_ = false;
    return;
  }
  if (!failing_) {
    std::cerr << "tributary: warning: could not save the model learned so far (" << documents << " documents) to "
              << out_ << ": " << st.ToString() << "; learning goes on and the save is tried again" << std::endl;
  }
  failing_ = true;
}

void ReportStopped(const std::string& command, uint64_t documents, const std::string& out) {
  std::cerr << "tributary " << command << ": " << StopSignals::Name(StopSignals::Received())
            << ": the stream ends here (" << documents << " documents learned)"
            << (out.empty() ? std::string("; no --out, nothing saved") : "; the model is saved to " + out) << std::endl;
}

int StoppedBeforeLearning(const std::string& command) {
  std::cerr << "tributary " << command << ": " << StopSignals::Name(StopSignals::Received())
            << " before any document was learned: nothing to save" << std::endl;
  return kExitOk;
}

}  // namespace tributary::cli
