#pragma once
/// @file plugin_loader.hpp
/// Finds plugin libraries, checks them, and loads their backends.
///
/// Search order (first wins for a given backend name; later ones are listed
/// as shadowed): explicit directories (--plugin-path, config `plugin_paths`),
/// then $POLYHAL_PLUGIN_PATH (colon-separated), then the install directory
/// `<exe>/../lib/polyhal/plugins`, then the build tree `<exe>/../plugins`
/// (only when `<exe>/..` holds a CMakeCache.txt). Files named
/// `libpolyhal_plugin_*.so` are candidates. A plugin that fails to load is
/// reported with a one-line reason and never stops the others.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "polyhal/backend.hpp"

namespace polyhal {

/// A directory to search and why it is searched.
struct PluginSearchDir {
  std::filesystem::path path;
  std::string origin;  ///< "--plugin-path", "POLYHAL_PLUGIN_PATH", "install", "build tree"
};

struct PluginSearchOptions {
  std::vector<std::filesystem::path> explicit_dirs;
  bool use_environment = true;           ///< read POLYHAL_PLUGIN_PATH
  std::filesystem::path executable_dir;  ///< empty: no install/build-tree dirs
  bool allow_world_writable = false;     ///< load from world-writable dirs/files
};

/// The directories to search, in order, deduplicated.
std::vector<PluginSearchDir> plugin_search_dirs(const PluginSearchOptions& options);

/// What happened to one candidate file.
struct PluginCandidate {
  enum class Status { loaded, rejected, shadowed };
  std::filesystem::path path;
  std::string origin;
  Status status = Status::rejected;
  std::string reason;  ///< one line; empty when loaded
  std::string name;    ///< from the descriptor, when it could be read
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

  /// Loads a single file, outside any search; throws PluginError with the reason.
  static std::shared_ptr<Backend> load_file(const std::filesystem::path& file,
                                            bool allow_world_writable, PluginCandidate* info);

 private:
  std::vector<PluginCandidate> candidates_;
  std::map<std::string, std::shared_ptr<Backend>> backends_;
};

}  // namespace polyhal
