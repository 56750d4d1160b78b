#include "polyhal/app/plugin_loader.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cctype>
#include <fstream>
#include <optional>

#include "polyhal/abi.hpp"
#include "polyhal/app/suggest.hpp"
#include "polyhal/boundary_layout.hpp"
#include "polyhal/error.hpp"
#include "runtime/plugin_trust.hpp"

namespace polyhal {
namespace {

constexpr std::string_view kPluginPrefix = "libpolyhal_plugin_";
constexpr std::string_view kPluginSuffix = ".so";
constexpr const char* kEntryPoint = "polyhal_plugin_entry";

/// Boost.DLL reports every dlopen failure as "bad file descriptor"; dlerror
/// has the real reason, so ask the dynamic loader directly.
std::string dlopen_failure_reason(const std::filesystem::path& file) {
  ::dlerror();
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    ::dlclose(handle);
    return "the dynamic loader failed once and then succeeded; retry";
  }
  const char* text = ::dlerror();
  std::string reason = text != nullptr ? text : "unknown dynamic loader error";
  // "path: libfoo.so: cannot open shared object file" names a dependency.
  const std::string own_prefix = file.string() + ": ";
  if (reason.starts_with(own_prefix)) reason = reason.substr(own_prefix.size());
  if (reason.find("cannot open shared object file") != std::string::npos) {
    return "missing dependency: " + reason + " (install the library or fix LD_LIBRARY_PATH)";
  }
  if (reason.find("invalid ELF header") != std::string::npos ||
      reason.find("file too short") != std::string::npos) {
    return "not a shared library (" + reason + "): the file is corrupt or not a plugin";
  }
  if (reason.find("undefined symbol") != std::string::npos) {
    return "unresolved symbol: " + reason + " (plugin built against another polyhal version?)";
  }
  return reason;
}

std::string check_descriptor(const polyhal_plugin_descriptor& d) {
  // The first four fields are frozen across every ABI: the version is read
  // before trusting the descriptor's size.
  if (d.struct_size < offsetof(polyhal_plugin_descriptor, name)) {
    return fmt::format("descriptor is {} bytes: not a polyhal plugin descriptor", d.struct_size);
  }
  if (d.abi_major != kAbiMajor || d.abi_minor > kAbiMinor) {
    return fmt::format(
        "plugin ABI {}.{}, host accepts {}.0-{}.{}: install the plugin package built for this "
        "polyhal, or rebuild the plugin against polyhal-dev",
        d.abi_major, d.abi_minor, kAbiMajor, kAbiMajor, kAbiMinor);
  }
  if (d.struct_size < sizeof(polyhal_plugin_descriptor)) {
    return fmt::format("descriptor is {} bytes, host needs at least {}: plugin ABI too old",
                       d.struct_size, sizeof(polyhal_plugin_descriptor));
  }
  const std::string stdlib = d.stdlib != nullptr ? d.stdlib : "(none)";
  if (stdlib != POLYHAL_STDLIB_ID) {
    return fmt::format(
        "plugin built with C++ library '{}', host uses '{}': rebuild the plugin with "
        "the host's toolchain",
        stdlib, POLYHAL_STDLIB_ID);
  }
  if (d.op_schema_version != kOpSchemaVersion) {
    return fmt::format(
        "plugin built for op schema {}, host has op schema {}: its kernels were written for "
        "other ops; install the plugin package built for this polyhal, or rebuild the plugin "
        "against polyhal-dev",
        d.op_schema_version, kOpSchemaVersion);
  }
  if (d.boundary_layout != boundary_layout_fingerprint()) {
    return fmt::format(
        "plugin's boundary classes have another layout (fingerprint {:016x}, host {:016x}): it "
        "was built against other polyhal headers; rebuild it against polyhal-dev",
        d.boundary_layout, boundary_layout_fingerprint());
  }
  if (d.name == nullptr || d.create_backend == nullptr) {
    return "descriptor has no name or no create_backend function";
  }
  return {};
}

}  // namespace

namespace detail {

std::string backend_name_from_file(const std::filesystem::path& file) {
  const std::string base = file.filename().string();
  if (!base.starts_with(kPluginPrefix) || !base.ends_with(kPluginSuffix) ||
      base.size() == kPluginPrefix.size() + kPluginSuffix.size()) {
    return {};
  }
  return base.substr(kPluginPrefix.size(),
                     base.size() - kPluginPrefix.size() - kPluginSuffix.size());
}

std::vector<std::pair<PluginCandidate, std::filesystem::path>> find_plugin_files(
    const PluginSearchOptions& options) {
  std::vector<std::pair<PluginCandidate, std::filesystem::path>> found;
  std::map<std::string, std::filesystem::path> first_by_name;
  for (const auto& dir : plugin_search_dirs(options)) {
    std::error_code ec;
    if (!dir.refused.empty() || !std::filesystem::is_directory(dir.path, ec)) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path, ec)) {
      if (!backend_name_from_file(entry.path()).empty()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      PluginCandidate candidate;
      candidate.path = file;
      candidate.origin = dir.origin;
      candidate.name = backend_name_from_file(file);
      if (auto it = first_by_name.find(candidate.name); it != first_by_name.end()) {
        candidate.status = PluginCandidate::Status::shadowed;
        candidate.reason =
            "shadowed by " + it->second.string() + " (found earlier in the search order)";
      } else {
        first_by_name[candidate.name] = file;
        if (options.only_backend && *options.only_backend != candidate.name) {
          candidate.status = PluginCandidate::Status::not_selected;
          candidate.reason = "not selected (only the backend asked for is loaded)";
        }
      }
      found.emplace_back(std::move(candidate), dir.path);
    }
  }
  return found;
}

}  // namespace detail

std::string_view plugin_status_name(PluginCandidate::Status status) noexcept {
  switch (status) {
    case PluginCandidate::Status::loaded:
      return "loaded";
    case PluginCandidate::Status::rejected:
      return "rejected";
    case PluginCandidate::Status::shadowed:
      return "shadowed";
    case PluginCandidate::Status::crashed:
      return "crashed";
    case PluginCandidate::Status::not_selected:
      return "not selected";
  }
  return "?";
}

std::shared_ptr<Backend> PluginLoader::load_file(const std::filesystem::path& file,
                                                 bool allow_world_writable, PluginCandidate* info,
                                                 const std::filesystem::path& search_dir) {
  PluginCandidate scratch;
  PluginCandidate& out = info != nullptr ? *info : scratch;
  out.path = file;
  auto refuse = [&](const std::string& reason) -> std::shared_ptr<Backend> {
    out.status = PluginCandidate::Status::rejected;
    out.reason = reason;
    throw PluginError(fmt::format("plugin {}: {}", file.string(), reason));
  };

  if (!std::filesystem::is_regular_file(file)) return refuse("no such file");
  if (std::string problem = detail::plugin_trust_problem(search_dir, file, allow_world_writable);
      !problem.empty()) {
    return refuse(problem);
  }

  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  // Immediate binding: an unresolved symbol is found now, not mid-run.
  library->load(file.string(), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local,
                ec);
  if (ec) return refuse(dlopen_failure_reason(file));
  if (!library->has(kEntryPoint)) {
    return refuse(
        fmt::format("no entry point '{}': not a polyhal plugin (define it with "
                    "POLYHAL_PLUGIN from polyhal/plugin.hpp)",
                    kEntryPoint));
  }
  using EntryPoint = const polyhal_plugin_descriptor*();
  EntryPoint& entry = library->get_alias<EntryPoint>(kEntryPoint);
  const polyhal_plugin_descriptor* descriptor = entry();
  if (descriptor == nullptr) return refuse("entry point returned no descriptor");
  // Read only the frozen leading fields until the version is accepted.
  out.abi = fmt::format("{}.{}", descriptor->abi_major, descriptor->abi_minor);
  if (std::string problem = check_descriptor(*descriptor); !problem.empty()) return refuse(problem);
  const std::string file_name = detail::backend_name_from_file(file);
  if (!file_name.empty() && file_name != descriptor->name) {
    return refuse(fmt::format(
        "declares backend '{}' but its file is named for '{}': backends are selected by file "
        "name, so rename it libpolyhal_plugin_{}.so",
        descriptor->name, file_name, descriptor->name));
  }
  out.name = descriptor->name;
  out.version = descriptor->version != nullptr ? descriptor->version : "";
  out.summary = descriptor->summary != nullptr ? descriptor->summary : "";

  std::unique_ptr<Backend> backend;
  try {
    backend.reset(descriptor->create_backend());
  } catch (const std::exception& e) {
    return refuse(fmt::format("creating the backend failed: {}", e.what()));
  } catch (...) {
    return refuse("creating the backend threw an exception of unknown type (not a std::exception)");
  }
  if (!backend) return refuse("create_backend returned nothing");
  if (backend->name() != out.name) {
    return refuse(fmt::format("descriptor says '{}' but the backend calls itself '{}'", out.name,
                              backend->name()));
  }
  std::shared_ptr<const void> anchor = library;
  backend->library_anchor_ = anchor;
  out.status = PluginCandidate::Status::loaded;
  out.reason.clear();
  return anchor_to_library(std::move(backend), anchor);
}

PluginLoader::PluginLoader(PluginSearchOptions options) {
  for (auto& [candidate, search_dir] : detail::find_plugin_files(options)) {
    if (detail::pending(candidate)) {
      try {
        auto backend =
            load_file(candidate.path, options.allow_world_writable, &candidate, search_dir);
        backends_[candidate.name] = std::move(backend);
        spdlog::debug("loaded plugin '{}' from {}", candidate.name, candidate.path.string());
      } catch (const PluginError& e) {
        spdlog::debug("{}", e.what());
      }
    }
    candidates_.push_back(std::move(candidate));
  }
}

PluginLoader::~PluginLoader() = default;

std::vector<std::string> PluginLoader::backend_names() const {
  std::vector<std::string> names;
  for (const auto& [name, backend] : backends_) names.push_back(name);
  return names;
}

std::shared_ptr<Backend> PluginLoader::backend(const std::string& name) const {
  if (auto it = backends_.find(name); it != backends_.end()) return it->second;
  throw PluginError(detail::backend_unavailable_message(name, candidates_));
}

std::string detail::backend_unavailable_message(const std::string& name,
                                                const std::vector<PluginCandidate>& candidates) {
  std::string message = fmt::format("backend '{}' is not available", name);
  std::string refusals;
  std::vector<std::string> names;  // the backends found: loaded, or not selected
  for (const auto& c : candidates) {
    const bool refused = c.status == PluginCandidate::Status::rejected ||
                         c.status == PluginCandidate::Status::crashed;
    if ((c.name == name || backend_name_from_file(c.path) == name) && refused)
      refusals += fmt::format("\n  {}: {}", c.path.string(), c.reason);
    if (c.status == PluginCandidate::Status::loaded ||
        c.status == PluginCandidate::Status::not_selected)
      names.push_back(c.name);
  }
  std::sort(names.begin(), names.end());
  if (!refusals.empty()) {
    message += ": its plugin was found but refused:" + refusals;
  } else {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const auto near = lower != name && std::find(names.begin(), names.end(), lower) != names.end()
                          ? std::optional<std::string>(lower)
                          : nearest_word(name, names);
    // Only the backends polyhal ships have packages; anything else is a
    // third party's plugin.
    const bool shipped = name == "cpu" || name == "ipu" || name == "gaudi";
    message += fmt::format(": no plugin libpolyhal_plugin_{}.so was found", name);
    // A shipped backend's package first: "ipu" is one letter from "cpu".
    if (shipped)
      message += fmt::format(" (install package polyhal-plugin-{}, or pass --plugin-path)", name);
    else if (near)
      message += fmt::format(" (did you mean '{}'?{})", *near,
                             *near == lower ? " backend names are lower case" : "");
    else
      message += fmt::format(
          " (polyhal's packages provide the backends cpu, ipu and gaudi; a third-party "
          "plugin's directory goes in --plugin-path or POLYHAL_PLUGIN_PATH)");
  }
  message += names.empty() ? "\n  no backends are loaded; run 'polyhal plugins' to see why"
                           : fmt::format(
                                 "\n  plugins found for: {} (run 'polyhal plugins' to "
                                 "check them)",
                                 fmt::join(names, ", "));
  return message;
}

}  // namespace polyhal
