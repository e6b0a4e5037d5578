// PluginRegistry (plugin_registry.h): the plugins of a search path, found by
// name (lazily: the file the name points to first) or by path, each file
// loaded once through plugin_loader.h, refused files kept with their reason.
#include "tributary/plugin_registry.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "plugin_loader.h"

namespace tributary {

namespace fs = std::filesystem;

namespace {

std::string ProgramDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return fs::path(buf).parent_path().string();
}

}  // namespace

std::string PluginRegistry::BuiltinPluginDir() {
  return (fs::path(ProgramDir()) / ".." / "lib" / "tributary" / "plugins").lexically_normal().string();
}

std::vector<std::string> PluginRegistry::DefaultSearchPath() {
  std::vector<std::string> dirs{BuiltinPluginDir()};
  if (const char* env = std::getenv("TRIBUTARY_PLUGIN_PATH")) {
    std::string s(env);
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) dirs.push_back(s.substr(start, end - start));
      start = end + 1;
    }
  }
  return dirs;
}

PluginRegistry::PluginRegistry(std::vector<std::string> search_path, bool first_is_builtin)
    : search_path_(std::move(search_path)), first_is_builtin_(first_is_builtin) {}

PluginRegistry::PluginRegistry() : PluginRegistry(DefaultSearchPath(), true) {}

const PluginRegistry& PluginRegistry::Default() {
  // Leaked on purpose: a model (and its plugin handles) may outlive every
  // static destructor that would otherwise unload the plugins under it.
  static const PluginRegistry* registry = new PluginRegistry();
  return *registry;
}

std::shared_ptr<const Plugin> PluginRegistry::LoadLocked(const std::string& file, size_t d) const {
  if (std::find(tried_.begin(), tried_.end(), file) != tried_.end()) {
    for (const auto& p : plugins_) {
      if (p->path == file) return p;
    }
    return nullptr;
  }
  tried_.push_back(file);
  // Plugins outside the built-in directory are probed in a child process
  // before the host loads them (ProbeInChild): a third-party file that
  // crashes at load is listed as refused, with its signal, and every
  // command still runs.
  const bool builtin_dir = first_is_builtin_ && d == 0;
  if (!builtin_dir) {
    Status ok = loader::ProbeInChild(file);
    if (!ok.ok()) {
      refused_.push_back({file, ok.message()});
      return nullptr;
    }
  }
  auto r = loader::LoadAny(file);
  if (!r.ok()) {
    refused_.push_back({file, r.status().message()});
    return nullptr;
  }
  auto plugin = *r;
  auto same = std::find_if(plugins_.begin(), plugins_.end(),
                           [&](const auto& p) { return p->kind == plugin->kind && p->name == plugin->name; });
  if (same != plugins_.end()) {
    if ((*same)->path != plugin->path) {
      refused_.push_back({plugin->path, std::string(KindName(plugin->kind)) + " name '" + plugin->name +
                                            "' is already taken by " + ((*same)->builtin ? "built-in " : "") +
                                            (*same)->path + " (load this one by path to use it)"});
    }
    return nullptr;
  }
  if (builtin_dir) {
    auto copy = std::make_shared<Plugin>(*plugin);
    copy->builtin = true;
    plugin = copy;
  }
  plugins_.push_back(plugin);
  return plugin;
}

std::shared_ptr<const Plugin> PluginRegistry::LoadNamedLocked(trib_plugin_kind kind, const std::string& name) const {
  std::string stem = std::string("tributary_") + KindName(kind) + "_" + name;
  std::replace(stem.begin(), stem.end(), '-', '_');
  for (size_t d = 0; d < search_path_.size(); ++d) {
    const std::string file = (fs::path(search_path_[d]) / (stem + ".so")).string();
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;
    auto p = LoadLocked(loader::Canonical(file), d);
    if (p && p->kind == kind && p->name == name) return p;
  }
  return nullptr;
}

void PluginRegistry::ScanLocked() const {
  if (scanned_) return;
  for (size_t d = 0; d < search_path_.size(); ++d) {
    std::error_code ec;
    if (!fs::is_directory(search_path_[d], ec)) continue;
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(search_path_[d], ec)) {
      if (entry.path().extension() == ".so") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) LoadLocked(loader::Canonical(file), d);
  }
  // Lookups by name first loaded the file their name points to; keep the
  // search path's order (an earlier directory wins) for what a full scan
  // reports.
  std::vector<fs::path> dirs;
  for (const auto& d : search_path_) dirs.push_back(loader::Canonical(d));
  auto dir_of = [&](const std::string& path) {
    const fs::path parent = fs::path(path).parent_path();
    return static_cast<size_t>(std::find(dirs.begin(), dirs.end(), parent) - dirs.begin());
  };
  std::stable_sort(plugins_.begin(), plugins_.end(), [&](const auto& a, const auto& b) {
    const size_t da = dir_of(a->path), db = dir_of(b->path);
    return da != db ? da < db : a->path < b->path;
  });
  scanned_ = true;
}

void PluginRegistry::Scan() const {
  std::lock_guard<std::mutex> lock(mu_);
  ScanLocked();
}

const std::vector<std::shared_ptr<const Plugin>>& PluginRegistry::plugins() const {
  Scan();
  return plugins_;
}

const std::vector<RefusedPlugin>& PluginRegistry::refused() const {
  Scan();
  return refused_;
}

Result<std::shared_ptr<const Plugin>> PluginRegistry::LoadExplicit(const std::string& path) const {
  const std::string file = loader::Canonical(path);
  const bool loaded = loader::Loaded(file);
  std::error_code ec;
  const bool builtin = first_is_builtin_ && !search_path_.empty() &&
                       fs::path(file).parent_path() == fs::path(loader::Canonical(search_path_[0]));
  // A file the user named is probed like one found on the search path: one
  // that crashes while loading is refused with its signal, the host lives
  // (the Python module's interpreter, a long-running service).
  if (!loaded && !builtin && fs::exists(file, ec)) TRIB_RETURN_IF_ERROR(loader::ProbeInChild(file));
  return loader::LoadAny(path);
}

Status PluginRegistry::Add(const std::string& path) const {
  auto r = LoadExplicit(path);
  if (!r.ok()) return r.status();
  std::lock_guard<std::mutex> lock(mu_);
  const auto& plugin = *r;
  // What the name lookup would find otherwise: the file named after it.
  if (!scanned_) LoadNamedLocked(plugin->kind, plugin->name);
  for (const auto& p : plugins_) {
    if (p->kind != plugin->kind || p->name != plugin->name) continue;
    if (p->path == plugin->path) return Status::OK();
    return Status::InvalidArgument("plugin '" + plugin->path + "': " + KindName(plugin->kind) + " name '" +
                                   plugin->name + "' is already taken by " + (p->builtin ? "built-in " : "") + p->path);
  }
  tried_.push_back(plugin->path);
  plugins_.push_back(plugin);
  return Status::OK();
}

std::vector<std::string> PluginRegistry::loaded_files() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tried_;
}

Result<std::shared_ptr<const Plugin>> PluginRegistry::Find(const std::string& name_or_path,
                                                           trib_plugin_kind kind) const {
  bool is_path =
      name_or_path.find('/') != std::string::npos || (name_or_path.size() > 3 && name_or_path.ends_with(".so"));
  if (!is_path) return FindByName(name_or_path, kind);
  return loader::OfKind(LoadExplicit(name_or_path), kind);
}

Result<std::shared_ptr<const Plugin>> PluginRegistry::FindByName(const std::string& name, trib_plugin_kind kind) const {
  if (name.find('/') != std::string::npos || name.ends_with(".so") || name.empty()) {
    return Status::InvalidArgument(std::string(KindName(kind)) + " '" + name +
                                   "' is not a plugin name (a name has no '/' and no \".so\")");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto match = [&]() -> std::shared_ptr<const Plugin> {
    for (const auto& p : plugins_) {
      if (p->kind == kind && p->name == name) return p;
    }
    return nullptr;
  };
  if (!scanned_) {
    if (auto p = LoadNamedLocked(kind, name)) return p;
    if (auto p = match()) return p;
    ScanLocked();  // no file is named so: look inside every file
  }
  if (auto p = match()) return p;
  std::string names;
  for (const auto& p : plugins_) {
    if (p->kind != kind) continue;
    if (!names.empty()) names += ", ";
    names += p->name;
  }
  std::string msg = std::string("no ") + KindName(kind) + " plugin named '" + name + "'";
  for (const auto& r : refused_) {
    if (r.path.find(name) != std::string::npos) msg += "; refused " + r.path + ": " + r.reason;
  }
  msg += " (available: " + (names.empty() ? std::string("none") : names) + "; searched:";
  for (const auto& d : search_path_) msg += " " + d;
  msg += ")";
  return Status::NotFound(msg);
}

}  // namespace tributary
