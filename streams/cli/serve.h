#ifndef TRIBUTARY_STREAMS_CLI_SERVE_H_
#define TRIBUTARY_STREAMS_CLI_SERVE_H_

#include <CLI/CLI.hpp>
#include <string>

#include "cli_common.h"
#include "tributary/server.h"

namespace tributary::cli {

struct ServeFlags {
  LearnFlags learn;
  ServerOptions server;
  std::string engine = "auto";
  std::string model, schema, fsync = "interval", auth_token_file, port_file;
};

struct ClientFlags {
  std::string action, connect, in, auth_token_file;
  uint32_t batch = 100;
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  bool json = false;
  bool ids_as_is = false;
};

void AddServeCommands(CLI::App* app, ServeFlags* s, ClientFlags* c, CLI::App** serve_cmd, CLI::App** client_cmd);
int RunServe(const ServeFlags& f);
int RunClient(const ClientFlags& f);

}  // namespace tributary::cli

#endif  // TRIBUTARY_STREAMS_CLI_SERVE_H_
