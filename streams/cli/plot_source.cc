#include "plot_source.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace tributary::cli {

Status DrawLearningCurve(const std::string& json_text, const std::string& png, const std::string& title) {
  const std::string data = png + ".curve.json";
  {
    std::ofstream f(data, std::ios::binary | std::ios::trunc);
    f << json_text;
    if (!f) return Status::IOError("--plot '" + png + "': cannot write '" + data + "'");
  }
  const char* env = std::getenv("TRIBUTARY_PYTHON");
  const std::string python = env && *env ? env : "/usr/bin/python3";
  const std::string code = std::string(PlotModuleSource()) + "\nimport sys\nsys.exit(main(sys.argv[1:]))\n";
  std::vector<std::string> args = {python, "-c", code, "curve", data, png, title};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::IOError("--plot '" + png + "': fork: " + std::strerror(errno));
  if (pid == 0) {
    ::setenv("MPLBACKEND", "Agg", 1);
    ::execv(python.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::remove(data.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::OK();
  const int code_or_signal = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  if (code_or_signal == 127) {
    return Status::NotFound("--plot '" + png + "': cannot run " + python +
                            " (install python3 and python3-matplotlib, or set TRIBUTARY_PYTHON)");
  }
  return Status::IOError("--plot '" + png + "': " + python + " could not draw the curve (exit " +
                         std::to_string(code_or_signal) +
                         "; its message is above; is python3-matplotlib installed? apt install python3-matplotlib)");
}

}  // namespace tributary::cli
