// Whether a plugin file may be loaded at all: the trust rules a system
// service applies to code it runs (docs/hardening.md, "Plugin trust").
#include "plugin_trust.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace polyhal::detail {
namespace {

namespace fs = std::filesystem;

/// Why `path` (a directory on the way to a plugin, or the plugin itself)
/// lets someone other than root or this user change what gets loaded, or
/// empty. `holds_plugin`: the directory the plugin file is in, where a
/// sticky bit does not help (anyone could still add a file next to it).
std::string writable_by_others(const fs::path& path, const struct stat& info, bool is_file,
                               bool holds_plugin) {
  const bool sticky_dir = S_ISDIR(info.st_mode) && (info.st_mode & S_ISVTX) != 0;
  // A sticky directory (/tmp) only lets an entry's owner rename or remove it,
  // so a path through it stays ours; the plugin's own directory is different.
  const bool protected_by_sticky = sticky_dir && !holds_plugin && !is_file;
  const char* what = is_file ? "file" : "directory";
  if ((info.st_mode & S_IWOTH) != 0 && !protected_by_sticky) {
    return fmt::format("{} {} is world-writable (anyone could put code there)", what,
                       path.string());
  }
  // A group other than root's or this user's own may hold other users.
  if ((info.st_mode & S_IWGRP) != 0 && info.st_gid != 0 && info.st_gid != ::getegid() &&
      !protected_by_sticky) {
    return fmt::format("{} {} is writable by group {} (other users could put code there)", what,
                       path.string(), info.st_gid);
  }
  return {};
}

std::string owned_by_others(const fs::path& path, const struct stat& info, bool is_file) {
  if (info.st_uid == 0 || info.st_uid == ::geteuid()) return {};
  return fmt::format("{} {} is owned by uid {}, neither root nor this user (uid {})",
                     is_file ? "file" : "directory", path.string(), info.st_uid, ::geteuid());
}

/// Checks `target` and every directory above it, up to '/'.
std::string check_chain(const fs::path& target, bool target_is_file, bool allow_writable,
                        bool waivable) {
  fs::path current = target;
  bool is_file = target_is_file;
  bool holds_plugin = !target_is_file;  // a directory target is the plugin's own
  for (;;) {
    struct stat info {};
    if (::stat(current.c_str(), &info) != 0) {
      return fmt::format("cannot inspect {}: {}", current.string(), std::strerror(errno));
    }
    if (std::string why = owned_by_others(current, info, is_file); !why.empty()) return why;
    if (!allow_writable) {
      if (std::string why = writable_by_others(current, info, is_file, holds_plugin); !why.empty())
        return why + (waivable ? "; fix the permissions or pass --allow-world-writable-plugins"
                               : "; fix the permissions");
    }
    if (current == current.root_path() || !current.has_parent_path()) return {};
    holds_plugin = is_file;  // the file's directory holds the plugin
    is_file = false;
    current = current.parent_path();
  }
}

}  // namespace

std::string plugin_trust_problem(const fs::path& search_dir, const fs::path& file,
                                 bool allow_writable, bool waivable) {
  std::error_code ec;
  const fs::path real = fs::canonical(file, ec);
  if (ec) return fmt::format("cannot resolve {}: {}", file.string(), ec.message());
  if (!fs::is_regular_file(real, ec)) return fmt::format("{} is not a regular file", real.string());
  // The file as it really is (after symlinks), and the directory it was found
  // in: whoever can change either decides what code runs.
  if (std::string why = check_chain(real, /*target_is_file=*/true, allow_writable, waivable);
      !why.empty())
    return "not trusted: " + why;
  if (!search_dir.empty()) {
    const fs::path dir = fs::canonical(search_dir, ec);
    if (ec) return fmt::format("cannot resolve {}: {}", search_dir.string(), ec.message());
    if (dir != real.parent_path()) {
      if (std::string why = check_chain(dir, /*target_is_file=*/false, allow_writable, waivable);
          !why.empty())
        return "not trusted: " + why;
    }
  }
  return {};
}

}  // namespace polyhal::detail
