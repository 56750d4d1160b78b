#pragma once
// Private to the loader: may this plugin file be loaded?
#include <filesystem>
#include <string>

namespace polyhal::detail {

/// Why `file`, found in `search_dir`, must not be loaded, or empty when it
/// may. After resolving symlinks, the file, the directory holding it and
/// every directory above both (and above `search_dir`) must be owned by root
/// or this user, and not writable by others: not world-writable (a sticky
/// directory such as /tmp is accepted above the plugin's own directory,
/// since only an entry's owner may rename it), not group-writable unless the
/// group is root's or this user's. `allow_writable` (the command line's
/// --allow-world-writable-plugins, never a config file) waives the
/// writability rules, never the ownership rule. `waivable`: whether the
/// message may point at that flag (polyhal's own modules have no waiver).
std::string plugin_trust_problem(const std::filesystem::path& search_dir,
                                 const std::filesystem::path& file, bool allow_writable,
                                 bool waivable = true);

}  // namespace polyhal::detail
