// Finding, checking and loading family and loss plugins.
//
// A plugin file is refused, with a reason naming the file, when it cannot be
// dlopen()ed, lacks the info or entry symbol, carries the wrong magic, kind
// or ABI major version, needs a newer ABI minor version than this host, or
// reports an error from its init function. Refusal never crashes the host.
//
// Plugins are loaded only when needed: Find(name) loads the file its name
// points to (tributary_<kind>_<name>.so, '-' spelled '_', in the search path's
// order) and nothing else; only when no file is named so, or when the whole
// list is asked for (Scan(), plugins(), refused()), is every file loaded.
//
// Thread safety: the const calls may run concurrently (the lazy loading is
// serialised inside). Loading a file outside the built-in directory forks a
// probe process (ProbeInChild): do that while the process has one thread, or
// call Scan() first. Loaded plugins live until the process exits (the host
// never dlclose()s a plugin that loaded, so objects created by it can never
// outlive its code).
#ifndef TRIBUTARY_PLUGIN_REGISTRY_H_
#define TRIBUTARY_PLUGIN_REGISTRY_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tributary/plugin_abi.h"
#include "tributary/status.h"

namespace tributary {

/// One option of a plugin's option table (trib_option_spec, ABI 1.3), copied
/// out of the plugin at load.
struct OptionSpec {
  std::string name;    ///< as the user writes it: [a-z0-9_-]+, distinct within the table
  uint32_t type = 0;   ///< TRIB_OPTION_NUMBER, ...
  uint32_t flags = 0;  ///< TRIB_OPTION_MIN_EXCLUSIVE, ...
  /// Lower end of the NUMBER / INTEGER range (exclusive with TRIB_OPTION_MIN_EXCLUSIVE); -inf: unbounded.
  double min = 0, max = 0;           ///< upper end (exclusive with TRIB_OPTION_MAX_EXCLUSIVE); inf: unbounded
  bool has_default = false;          ///< the table gives a default text
  std::string default_value;         ///< as text; a description when derived_default()
  std::vector<std::string> choices;  ///< CHOICE: the values; NUMBER / INTEGER: accepted words
  /// One line for `tributary plugins --options`; empty when the table gives none.
  std::string help;
  std::string alias_of;  ///< ALIAS: the option this name stands for

  /// True for an ALIAS entry: another name of the option alias_of.
  bool is_alias() const { return type == TRIB_OPTION_ALIAS; }
  /// True when default_value describes what the plugin derives ("1/K"), not a value (TRIB_OPTION_DERIVED_DEFAULT).
  bool derived_default() const { return (flags & TRIB_OPTION_DERIVED_DEFAULT) != 0; }
  /// "number", "integer", "boolean", "string", "choice", "alias".
  const char* type_name() const;
  /// The range or the choices in short: "(0, 1e100]", ">= 0", "cvb0|vi|gibbs",
  /// "> 0, or laplace|log"; "" when anything goes.
  std::string range() const;
  /// What a value must be, as in the plugins' messages: "a number > 0".
  std::string expected() const;
};

/// A successfully loaded plugin. Immutable; shared by everything using it.
struct Plugin {
  trib_plugin_kind kind;        ///< family or loss: which member of `vtable` is filled
  std::string name;             ///< from trib_plugin_info: [a-z0-9_-]+, what models and --family / --loss name
  std::string version;          ///< MAJOR.MINOR.PATCH as the plugin declares it, recorded in snapshots; "" if none
  std::string description;      ///< one line; "" if none
  uint32_t abi_major = 0;       ///< the ABI major version the plugin was built for (== TRIB_ABI_MAJOR)
  uint32_t abi_minor = 0;       ///< the ABI minor version it was built for (<= TRIB_ABI_MINOR)
  std::string path;             ///< the file, absolute and without symlinks where they could be resolved
  trib_plugin_vtable vtable{};  ///< copied from the plugin, zero-extended
  bool builtin = false;         ///< found in the built-in plugin directory
  /// The plugin's option table (tributary_plugin_options, ABI 1.3), in its
  /// order; empty when it has none, or a table without entries (no options).
  std::vector<OptionSpec> option_specs;
  bool option_table = false;  ///< the plugin exports an option table

  /// The family vtable; meaningful only when kind is TRIB_KIND_FAMILY.
  const trib_family_vtable& family() const { return vtable.family; }
  /// The loss vtable; meaningful only when kind is TRIB_KIND_LOSS.
  const trib_loss_vtable& loss() const { return vtable.loss; }
  /// The options the plugin declares (see option_specs); meaningful only when
  /// has_option_table(): a plugin without a table may take options all the same.
  const std::vector<OptionSpec>& options() const { return option_specs; }
  /// True when the plugin exports an option table (tributary_plugin_options, ABI 1.3).
  bool has_option_table() const { return option_table; }
  /// The option named `name`, following an alias to its option; null if the
  /// table has none.
  const OptionSpec* FindOption(const std::string& name) const;
};

/// A plugin file the registry did not register, and why (PluginRegistry::refused()).
struct RefusedPlugin {
  std::string path;    ///< the file, as the registry names it (absolute, symlinks resolved where possible)
  std::string reason;  ///< the loader's refusal, a crash in the probe process, or the name taken by another file
};

/// "family" or "loss" ("unknown" for any other value): how messages name a kind.
const char* KindName(trib_plugin_kind kind);

/// The host API table handed to every plugin.
const trib_host_api* HostApi();

/// Loads one plugin file and checks it is of `kind`. Loading the same file
/// twice returns the same Plugin.
Result<std::shared_ptr<const Plugin>> LoadPluginFile(const std::string& path, trib_plugin_kind kind);

/// The family and loss plugins of a search path: finds them by name or path, loads them, and lists them with
/// the files it refused (see the file comment for lazy loading and thread safety).
class PluginRegistry {
 public:
  /// The built-in plugin directory (`<program dir>/../lib/tributary/plugins`),
  /// then each directory of $TRIBUTARY_PLUGIN_PATH (':'-separated).
  static std::vector<std::string> DefaultSearchPath();
  /// `<program dir>/../lib/tributary/plugins`, normalised, where `<program dir>` is the directory of the running
  /// executable (/proc/self/exe; "." if it cannot be read). The directory need not exist.
  static std::string BuiltinPluginDir();

  /// `search_path[0]` is treated as the built-in directory when `first_is_builtin`.
  explicit PluginRegistry(std::vector<std::string> search_path, bool first_is_builtin = true);
  /// A registry over DefaultSearchPath().
  PluginRegistry();
  /// The process's registry over DefaultSearchPath(): made on first use
  /// (thread-safe) and never destroyed, so plugins stay loaded as long as any
  /// model may use them. What the program uses, and what an embedder that
  /// needs no other search path should use (one registry, each plugin loaded
  /// and probed once per process).
  static const PluginRegistry& Default();

  /// Loads every *.so in the search path. Files that fail are recorded in
  /// refused(); a name already taken by an earlier directory (built-ins come
  /// first) is recorded as refused too, with the path that won. Never fails
  /// for a bad plugin; a directory that cannot be read is skipped. Files outside
  /// the built-in directory are first loaded in a child process (fork): one
  /// that crashes there is refused with its signal and never loaded into this
  /// process. REQUIRES: called while the process has a single thread.
  void Scan() const;

  /// Loads `path`, a file the user named (e.g. `tributary --plugin PATH`), and
  /// registers it under its name so that FindByName, and so models that name
  /// it, find it. Errors: the file is refused (PluginError, naming it); its
  /// kind and name are taken by another file already registered
  /// (InvalidArgument naming both: a built-in always keeps its name). The
  /// file is probed in a child process first, as Find does with a path.
  Status Add(const std::string& path) const;

  /// Every plugin and every refused file (Scan() first if not done).
  const std::vector<std::shared_ptr<const Plugin>>& plugins() const;
  /// Every file refused, with the reason (Scan() first if not done).
  const std::vector<RefusedPlugin>& refused() const;
  /// The directories searched, in order; the first is the built-in one when so constructed.
  const std::vector<std::string>& search_path() const { return search_path_; }
  /// The files loaded (or probed) so far, in order.
  std::vector<std::string> loaded_files() const;

  /// Looks a plugin up by name (loading only the file its name points to when
  /// the registry has not been scanned), or, when `name_or_path` contains a
  /// '/' or ends in ".so", loads that file directly: a user's explicit choice
  /// (probed in a child process first, like a file of the search path, unless
  /// it is in the built-in directory or loaded already: a file that crashes
  /// while loading is refused with its signal and the host goes on).
  /// Errors: NotFound listing the available names; PluginError for a refused file.
  Result<std::shared_ptr<const Plugin>> Find(const std::string& name_or_path, trib_plugin_kind kind) const;
  /// By name only, never a path: what a model file may name (a snapshot never
  /// makes the host load a file of its choosing). A name with '/' or ".so"
  /// is refused.
  Result<std::shared_ptr<const Plugin>> FindByName(const std::string& name, trib_plugin_kind kind) const;

 private:
  void ScanLocked() const;
  /// Loads `file` from directory index `d` into plugins_/refused_ (probing it
  /// first outside the built-in directory); returns the plugin or null.
  std::shared_ptr<const Plugin> LoadLocked(const std::string& file, size_t d) const;
  /// A file the user named (Find by path, Add): probed in a child process
  /// first unless already loaded or in the built-in directory.
  Result<std::shared_ptr<const Plugin>> LoadExplicit(const std::string& path) const;
  /// Loads tributary_<kind>_<name>.so from the first directory whose file of
  /// that name holds that plugin; null if none does.
  std::shared_ptr<const Plugin> LoadNamedLocked(trib_plugin_kind kind, const std::string& name) const;
  std::vector<std::string> search_path_;
  bool first_is_builtin_;
  mutable std::mutex mu_;
  mutable bool scanned_ = false;
  mutable std::vector<std::shared_ptr<const Plugin>> plugins_;
  mutable std::vector<RefusedPlugin> refused_;
  mutable std::vector<std::string> tried_;  ///< files loaded or probed
};

}  // namespace tributary

#endif  // TRIBUTARY_PLUGIN_REGISTRY_H_
