#pragma once
/// @file plugin_loader.hpp
/// Finds plugin libraries, checks them, and loads their backends.
///
/// Search order (first wins for a given backend name; later ones are listed
/// as shadowed): explicit directories (--plugin-path, config `plugin_paths`),
/// then $POLYHAL_PLUGIN_PATH (colon-separated, absolute entries only), then
/// the install directory `<exe>/../<libdir>/polyhal/plugins`, then either the
/// build tree `<exe>/../plugins` (when `<exe>/..` holds a CMakeCache.txt) or,
/// for an installed launcher, `/usr/local/<libdir>/polyhal/plugins`.
/// <libdir> is polyhal's (lib/x86_64-linux-gnu on Debian). Files named
/// `libpolyhal_plugin_<backend>.so` are candidates, and the file name is the
/// backend's name.
///
/// Two ways to load (docs/architecture.md, "The plugin boundary"):
/// - PluginLoader loads in this process, and with `only_backend` it opens
///   only that backend's file: `run` and `validate` never execute the code of
///   a plugin they did not select.
/// - probe_plugins loads each candidate in a child process of its own (fork
///   before dlopen), so a plugin that crashes, hangs or throws while loading
///   is reported ("crashed while loading: signal 11 (SIGSEGV)") and never
///   takes this process down: `plugins` and `devices` use it.
/// A plugin that fails to load is reported with a one-line reason and never
/// stops the others.
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/backend.hpp"

namespace polyhal {

/// Where locally built plugins go (`cmake --install` of an out-of-tree plugin
/// with the default prefix): /usr/local/<libdir>/polyhal/plugins, <libdir>
/// as polyhal was built (lib/x86_64-linux-gnu on Debian), then
/// /usr/local/lib/polyhal/plugins when that differs (GNUInstallDirs gives
/// plain `lib` under /usr/local, and so does a hand-written install rule).
std::vector<std::filesystem::path> local_plugin_dirs();
/// <exe_dir>/../<libdir>/polyhal/plugins: where an installed launcher finds
/// the plugins installed with it.
std::filesystem::path installed_plugin_dir(const std::filesystem::path& executable_dir);

/// A directory to search and why it is searched.
struct PluginSearchDir {
  std::filesystem::path path;
  std::string origin;  ///< "--plugin-path", "POLYHAL_PLUGIN_PATH", "install", "local", "build tree"
  /// Why this entry is not searched (e.g. a relative POLYHAL_PLUGIN_PATH
  /// entry, which would depend on the current directory); empty if searched.
  std::string refused;
};

struct PluginSearchOptions {
  std::vector<std::filesystem::path> explicit_dirs;
  bool use_environment = true;           ///< read POLYHAL_PLUGIN_PATH
  std::filesystem::path executable_dir;  ///< empty: no install/build-tree dirs
  /// Waives the writability trust rules (never ownership): only ever from
  /// the command line's --allow-world-writable-plugins, never a config file.
  bool allow_world_writable = false;
  /// Load only libpolyhal_plugin_<only_backend>.so; the other candidates are
  /// listed as not selected and never opened.
  std::optional<std::string> only_backend;
};

/// The directories to search, in order, deduplicated.
std::vector<PluginSearchDir> plugin_search_dirs(const PluginSearchOptions& options);

/// What happened to one candidate file.
struct PluginCandidate {
  enum class Status { loaded, rejected, shadowed, crashed, not_selected };
  std::filesystem::path path;
  std::string origin;
  Status status = Status::rejected;
  std::string reason;  ///< one line; empty when loaded
  std::string name;    ///< from the descriptor, else from the file name
  std::string version;
  std::string abi;  ///< "1.0"
  std::string summary;
};
std::string_view plugin_status_name(PluginCandidate::Status status) noexcept;

/// Loads every candidate once and keeps the accepted plugins loaded.
class PluginLoader {
 public:
  explicit PluginLoader(PluginSearchOptions options);
  ~PluginLoader();
  PluginLoader(const PluginLoader&) = delete;
  PluginLoader& operator=(const PluginLoader&) = delete;

  /// Every candidate seen, in search order.
  const std::vector<PluginCandidate>& candidates() const noexcept { return candidates_; }
  /// Names of the loaded backends, sorted.
  std::vector<std::string> backend_names() const;
  /// The backend called `name`. Throws PluginError listing what was found and
  /// why each candidate for that name was refused.
  std::shared_ptr<Backend> backend(const std::string& name) const;

  /// Loads a single file in this process; throws PluginError with the
  /// reason. `search_dir` (may be empty) is the directory it was found in,
  /// checked for trust with the file. A plugin whose declared name is not
  /// the one its file name gives is refused (`run --backend NAME` selects
  /// files by name, so it could never be selected).
  static std::shared_ptr<Backend> load_file(const std::filesystem::path& file,
                                            bool allow_world_writable, PluginCandidate* info,
                                            const std::filesystem::path& search_dir = {});

 private:
  std::vector<PluginCandidate> candidates_;
  std::map<std::string, std::shared_ptr<Backend>> backends_;
};

/// One candidate as loaded in a child process by probe_plugins.
struct ProbedPlugin {
  PluginCandidate candidate;
  std::string output;  ///< what the child's callback returned (loaded plugins only)
  /// What the callback threw, with its exit code; empty when it returned.
  std::optional<int> error_exit_code;
  std::string error;
};

/// Runs in the child after a plugin loaded; its text is returned to the parent.
using ProbeCallback = std::function<std::string(Backend& backend)>;

/// Loads every candidate (or only `options.only_backend`'s) in a child
/// process of its own and, when it loads, runs `in_child` there. A child
/// that dies by a signal is reported as crashed ("crashed while loading:
/// signal 11 (SIGSEGV)"), one that outlives `timeout` is killed and
/// reported. Nothing of any plugin runs in this process. Not for processes
/// that are already multi-threaded (e.g. after oneTBB started its workers).
std::vector<ProbedPlugin> probe_plugins(const PluginSearchOptions& options,
                                        const ProbeCallback& in_child = {},
                                        std::chrono::seconds timeout = std::chrono::seconds(30));

namespace detail {
/// The candidate files in search order: the first file for each backend
/// name is pending (status rejected, empty reason), later ones are
/// shadowed, and files of other backends than `only_backend` not selected.
std::vector<std::pair<PluginCandidate, std::filesystem::path>> find_plugin_files(
    const PluginSearchOptions& options);
/// The backend name a plugin file name gives, or empty if it is no plugin file.
std::string backend_name_from_file(const std::filesystem::path& file);
/// Whether find_plugin_files left `candidate` to be loaded.
inline bool pending(const PluginCandidate& candidate) {
  return candidate.status == PluginCandidate::Status::rejected && candidate.reason.empty();
}
/// Why backend `name` is not available, from what a search found: each
/// refusal or crash of its plugin, or the package to install, then the
/// backends that were found. For PluginError.
std::string backend_unavailable_message(const std::string& name,
                                        const std::vector<PluginCandidate>& candidates);
}  // namespace detail

}  // namespace polyhal
