// embed-service: learns from POST /learn and predicts on POST /predict at
// once, with Tributary embedded (service.h). Runs until SIGINT or SIGTERM.
//   embed_service [--port N] [--family NAME] [--loss NAME] [--snapshot PATH]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "service.h"

int main(int argc, char** argv) {
  embed::ServiceOptions opt;
  opt.plugin_dir = TRIBUTARY_PLUGIN_DIR;  // from find_package(Tributary)
  opt.port = 8080;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "embed_service: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--port") {
      opt.port = static_cast<uint16_t>(std::atoi(v.c_str()));
    } else if (a == "--family") {
      opt.family = v;
    } else if (a == "--loss") {
      opt.loss = v;
    } else if (a == "--snapshot") {
      opt.snapshot_path = v;
    } else {
      std::fprintf(stderr, "embed_service: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  // Wait for a signal on this thread; the service runs on its own threads.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto service = embed::Service::Start(opt);
  if (!service.ok()) {
    std::fprintf(stderr, "embed_service: %s\n", service.status().ToString().c_str());
    return 1;
  }
  std::printf("listening on %s:%u\n", opt.address.c_str(), static_cast<unsigned>((*service)->port()));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  (*service)->Stop();
  return 0;
}
