// Loading one plugin file (plugin_loader.h): dlopen, the metadata checked
// before any plugin code runs (magic, ABI version, kind, name), init with the
// host API, the vtable's required functions and the option table checked;
// the probe in a child process; LoadPluginFile.
#include "plugin_loader.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "tributary/plugin_options.h"

namespace tributary {

namespace fs = std::filesystem;

namespace loader {

namespace {

// Size of the vtable struct the host knows for a kind.
size_t VtableSize(trib_plugin_kind kind) {
  return kind == TRIB_KIND_FAMILY ? sizeof(trib_family_vtable) : sizeof(trib_loss_vtable);
}

std::mutex g_loaded_mu;
std::map<std::string, std::shared_ptr<const Plugin>>& LoadedByPath() {
  static auto* m = new std::map<std::string, std::shared_ptr<const Plugin>>();
  return *m;
}

bool ValidName(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* p = name; *p; ++p) {
    char ch = *p;
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_')) return false;
  }
  return true;
}

// Copies the optional option table (ABI 1.3) of a plugin built for ABI >= 1.3
// into `plugin`. A plugin without the symbol has no table. Returns "" or why
// the table is malformed (the plugin is then refused: a table the host cannot
// trust would show users wrong options).
std::string ReadOptionTable(void* handle, const trib_plugin_info& info, Plugin* plugin) {
  if (info.abi_minor < 3) return "";
  const auto* table = static_cast<const trib_option_table*>(dlsym(handle, TRIB_PLUGIN_OPTIONS_SYMBOL));
  if (table == nullptr) return "";
  constexpr size_t kMaxOptions = 1024;
  if (table->struct_size < offsetof(trib_option_table, specs) + sizeof(table->specs)) {
    return "struct_size " + std::to_string(table->struct_size) + " is too small";
  }
  // Every field of ABI 1.3's trib_option_spec must be there; later fields
  // (a larger spec_size) are read as far as this host knows them.
  if (table->spec_size < sizeof(trib_option_spec) || table->spec_size > 4096) {
    return "spec_size " + std::to_string(table->spec_size) + " is invalid (expected at least " +
           std::to_string(sizeof(trib_option_spec)) + ")";
  }
  if (table->specs == nullptr) return "no entries (specs is NULL)";
  std::vector<OptionSpec> specs;
  std::set<std::string> names;
  const auto* bytes = reinterpret_cast<const unsigned char*>(table->specs);
  for (size_t i = 0;; ++i) {
    if (i == kMaxOptions) return "no terminating entry (name NULL) within " + std::to_string(kMaxOptions) + " entries";
    trib_option_spec e;
    std::memcpy(&e, bytes + i * table->spec_size, sizeof e);
    if (e.name == nullptr) break;
    OptionSpec o;
    o.name = e.name;
    const std::string where = "entry " + std::to_string(i) + " ('" + o.name + "')";
    if (!ValidName(e.name)) return where + ": invalid option name (expected [a-z0-9_-]+)";
    if (!names.insert(o.name).second) return where + ": option named twice";
    if (e.type < TRIB_OPTION_NUMBER || e.type > TRIB_OPTION_ALIAS) {
      return where + ": unknown type " + std::to_string(e.type);
    }
    o.type = e.type;
    o.flags = e.flags;
    o.min = e.min;
    o.max = e.max;
    if (!(o.min <= o.max)) return where + ": min > max";
    o.has_default = e.default_value != nullptr;
    if (e.default_value) o.default_value = e.default_value;
    o.choices = sdk::SplitOptionWords(e.choices);
    if (o.type == TRIB_OPTION_CHOICE && o.choices.empty()) return where + ": a choice without choices";
    if (e.help) o.help = e.help;
    if (o.type == TRIB_OPTION_ALIAS) {
      if (e.alias_of == nullptr) return where + ": an alias of nothing";
      o.alias_of = e.alias_of;
    }
    specs.push_back(std::move(o));
  }
  for (const auto& o : specs) {
    if (!o.is_alias()) continue;
    auto target = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& t) { return t.name == o.alias_of; });
    if (target == specs.end() || target->is_alias()) {
      return "'" + o.name + "' is an alias of '" + o.alias_of + "', which is not an option of the table";
    }
  }
  plugin->option_specs = std::move(specs);
  plugin->option_table = true;
  return "";
}

}  // namespace

std::string Canonical(const std::string& path) {
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(fs::path(path), ec);
  return ec ? path : canon.string();
}

bool Loaded(const std::string& canonical_path) {
  std::lock_guard<std::mutex> lock(g_loaded_mu);
  return LoadedByPath().count(canonical_path) > 0;
}

Result<std::shared_ptr<const Plugin>> LoadAny(const std::string& path_in) {
  const std::string path = Canonical(path_in);
  std::error_code ec;
  {
    std::lock_guard<std::mutex> lock(g_loaded_mu);
    auto it = LoadedByPath().find(path);
    if (it != LoadedByPath().end()) return it->second;
  }
  auto fail = [&](const std::string& why) { return Status::PluginError("plugin '" + path + "': " + why); };
  if (!fs::exists(path, ec)) return Status::NotFound("plugin '" + path + "': no such file");
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    return fail(std::string("cannot be loaded: ") + (e ? e : "dlopen failed"));
  }
  // Read the metadata before running any plugin function.
  const auto* info = static_cast<const trib_plugin_info*>(dlsym(handle, TRIB_PLUGIN_INFO_SYMBOL));
  if (info == nullptr) {
    dlclose(handle);
    return fail("missing symbol '" TRIB_PLUGIN_INFO_SYMBOL "' (not a Tributary plugin?)");
  }
  if (info->magic != TRIB_PLUGIN_MAGIC) {
    std::ostringstream os;
    os << "bad magic in '" TRIB_PLUGIN_INFO_SYMBOL "': expected 0x" << std::hex << TRIB_PLUGIN_MAGIC << ", found 0x"
       << info->magic;
    dlclose(handle);
    return fail(os.str());
  }
  if (info->abi_major != TRIB_ABI_MAJOR) {
    std::ostringstream os;
    os << "ABI major version mismatch: host has " << TRIB_ABI_MAJOR << "." << TRIB_ABI_MINOR
       << ", plugin was built for " << info->abi_major << "." << info->abi_minor;
    dlclose(handle);
    return fail(os.str());
  }
  if (info->abi_minor > TRIB_ABI_MINOR) {
    std::ostringstream os;
    os << "plugin needs ABI " << info->abi_major << "." << info->abi_minor << " but host has only " << TRIB_ABI_MAJOR
       << "." << TRIB_ABI_MINOR;
    dlclose(handle);
    return fail(os.str());
  }
  if (info->kind != TRIB_KIND_FAMILY && info->kind != TRIB_KIND_LOSS) {
    std::ostringstream os;
    os << "unknown plugin kind " << info->kind << " (expected 1=family or 2=loss)";
    dlclose(handle);
    return fail(os.str());
  }
  if (!ValidName(info->name)) {
    dlclose(handle);
    return fail("invalid plugin name (expected [a-z0-9_-]+)");
  }
  auto init = reinterpret_cast<trib_plugin_init_fn>(dlsym(handle, TRIB_PLUGIN_INIT_SYMBOL));
  if (init == nullptr) {
    dlclose(handle);
    return fail("missing entry point '" TRIB_PLUGIN_INIT_SYMBOL "'");
  }
  auto kind = static_cast<trib_plugin_kind>(info->kind);
  trib_plugin_vtable vt;
  std::memset(&vt, 0, sizeof(vt));
  trib_error err{};
  int rc = init(HostApi(), &vt, &err);
  if (rc != TRIB_OK) {
    err.message[sizeof(err.message) - 1] = '\0';
    // The plugin's init ran, but it reports failure and created nothing we
    // hold; keep the handle open anyway (it may have registered atexit work).
    return fail(std::string("initialisation failed (code ") + std::to_string(rc) +
                "): " + (err.message[0] ? err.message : "no message"));
  }
  uint32_t vt_size = kind == TRIB_KIND_FAMILY ? vt.family.struct_size : vt.loss.struct_size;
  if (vt_size == 0 || vt_size > sizeof(trib_plugin_vtable)) {
    return fail("vtable struct_size " + std::to_string(vt_size) + " is invalid");
  }
  // Zero-extend: fields beyond what an older plugin filled are absent.
  if (vt_size < VtableSize(kind)) {
    std::memset(reinterpret_cast<char*>(&vt) + vt_size, 0, sizeof(vt) - vt_size);
  }
  if (kind == TRIB_KIND_FAMILY) {
    const auto& f = vt.family;
    const char* missing = nullptr;
    if (!f.create)
      missing = "create";
    else if (!f.destroy)
      missing = "destroy";
    else if (!f.clone)
      missing = "clone";
    else if (!f.layout)
      missing = "layout";
    else if (!f.rebuild)
      missing = "rebuild";
    else if (!f.state_create)
      missing = "state_create";
    else if (!f.state_destroy)
      missing = "state_destroy";
    else if (!f.score)
      missing = "score";
    else if (!f.accumulate)
      missing = "accumulate";
    else if (!f.commit)
      missing = "commit";
    if (missing) return fail(std::string("family vtable lacks required function '") + missing + "'");
    if (f.add_class && !f.grow_classes) {
      return fail("family vtable has 'add_class' but lacks 'grow_classes' (needed when the class capacity runs out)");
    }
    if (f.add_terms && !f.grow_terms) {
      return fail(
          "family vtable has 'add_terms' but lacks 'grow_terms' (needed when the vocabulary capacity runs out)");
    }
    const int frozen_hooks = (f.freeze != nullptr) + (f.frozen_destroy != nullptr) + (f.score_frozen != nullptr);
    if (frozen_hooks != 0 && frozen_hooks != 3) {
      return fail(std::string("family vtable has some of 'freeze', 'frozen_destroy' and 'score_frozen' but lacks '") +
                  (!f.freeze           ? "freeze"
                   : !f.frozen_destroy ? "frozen_destroy"
                                       : "score_frozen") +
                  "' (the three go together)");
    }
    if (f.proportions && !f.components) {
      return fail("family vtable has 'proportions' but lacks 'components' (the number of proportions)");
    }
    if (!(f.gradient_lambda >= 0) || !std::isfinite(f.gradient_lambda)) {
      return fail("family vtable's gradient_lambda is " + std::to_string(f.gradient_lambda) +
                  ", expected a finite number >= 0");
    }
  } else if (!vt.loss.weights) {
    return fail("loss vtable lacks required function 'weights'");
  } else if (vt.loss.create && (!vt.loss.destroy || !vt.loss.weights_with)) {
    return fail(std::string("loss vtable has 'create' but lacks required function '") +
                (vt.loss.destroy ? "weights_with" : "destroy") + "'");
  }
  auto plugin = std::make_shared<Plugin>();
  plugin->kind = kind;
  plugin->name = info->name;
  plugin->version = info->version ? info->version : "";
  plugin->description = info->description ? info->description : "";
  plugin->abi_major = info->abi_major;
  plugin->abi_minor = info->abi_minor;
  plugin->path = path;
  plugin->vtable = vt;
  if (std::string why = ReadOptionTable(handle, *info, plugin.get()); !why.empty()) {
    return fail("malformed option table '" TRIB_PLUGIN_OPTIONS_SYMBOL "': " + why);
  }
  std::lock_guard<std::mutex> lock(g_loaded_mu);
  auto [it, inserted] = LoadedByPath().emplace(path, plugin);
  return it->second;
}

Status ProbeInChild(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return Status::OK();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Status::OK();
  }
  if (pid == 0) {
    close(fds[0]);
    // The host's crash handlers (Python's faulthandler, a sanitizer's) are
    // not the probe's: a plugin that crashes here ends the child by the
    // signal alone, reported by the parent, not with a report that reads as
    // the host's own death.
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) signal(sig, SIG_DFL);
    auto r = LoadAny(path);
    const std::string msg = r.ok() ? std::string() : r.status().message();
    size_t off = 0;
    while (off < msg.size()) {
      const ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(r.ok() ? 0 : 3);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      msg.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return Status::PluginError("plugin '" + path + "': crashed while loading (signal " + std::to_string(sig) +
                               (name ? std::string(", SIG") + name : std::string()) +
                               ") in a probe process; not loaded");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::OK();
  if (!msg.empty()) return Status::PluginError(msg);
  return Status::PluginError("plugin '" + path + "': the probe process exited with status " +
                             std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
}

Result<std::shared_ptr<const Plugin>> OfKind(Result<std::shared_ptr<const Plugin>> r, trib_plugin_kind kind) {
  if (!r.ok()) return r.status();
  if ((*r)->kind != kind) {
    return Status::PluginError("plugin '" + (*r)->path + "' is a " + KindName((*r)->kind) + " plugin ('" + (*r)->name +
                               "'), expected a " + KindName(kind));
  }
  return r;
}

}  // namespace loader

Result<std::shared_ptr<const Plugin>> LoadPluginFile(const std::string& path, trib_plugin_kind kind) {
  return loader::OfKind(loader::LoadAny(path), kind);
}

}  // namespace tributary
