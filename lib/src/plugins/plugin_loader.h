// Loading one plugin file into the process (plugin_loader.cc), what
// PluginRegistry (plugin_registry.cc) and LoadPluginFile build on: the
// metadata read and checked before any plugin code runs, the vtable and
// option table checked, a probe in a child process for files not trusted to
// load safely, and the process-wide table of loaded files (a file is loaded
// once; the host never dlclose()s a plugin that loaded).
#ifndef TRIBUTARY_SRC_PLUGIN_LOADER_H_
#define TRIBUTARY_SRC_PLUGIN_LOADER_H_

#include <memory>
#include <string>

#include "tributary/plugin_abi.h"
#include "tributary/plugin_registry.h"
#include "tributary/status.h"

namespace tributary::loader {

// `path` made absolute and free of symlinks where possible (how plugin paths
// are recorded), else as given.
std::string Canonical(const std::string& path);

// True when the file at `canonical_path` (Canonical) is loaded in this process.
bool Loaded(const std::string& canonical_path);

// Loads without the kind check. Any problem -> PluginError naming the file.
Result<std::shared_ptr<const Plugin>> LoadAny(const std::string& path_in);

// Loads `path` in a child process first (fork; the child runs dlopen and
// the plugin's init, reports its refusal message through a pipe and
// _exit()s), so that a plugin whose constructor or init crashes is refused
// with the signal instead of taking the host down. OK: the child loaded it.
// If the probe itself cannot run (no pipe, no fork) the file is loaded as
// before, in-process.
// REQUIRES: the calling process has one thread (fork copies only the caller;
// Scan() runs at start-up).
Status ProbeInChild(const std::string& path);

// `r` when it loaded a plugin of `kind`, else why not.
Result<std::shared_ptr<const Plugin>> OfKind(Result<std::shared_ptr<const Plugin>> r, trib_plugin_kind kind);

}  // namespace tributary::loader

#endif  // TRIBUTARY_SRC_PLUGIN_LOADER_H_
