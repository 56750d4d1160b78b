#include "runtime/core_module.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "polyhal/error.hpp"
#include "runtime/plugin_trust.hpp"

#ifndef POLYHAL_VERSION
#error "POLYHAL_VERSION must be defined by the build"
#endif

namespace polyhal::detail {

std::string core_module_dir() {
  if (const char* dir = std::getenv("POLYHAL_MODULE_DIR"); dir != nullptr && *dir != '\0')
    return dir;
  // This file is part of libpolyhal: its own folder, wherever it is installed.
  return (boost::dll::this_line_location().parent_path() / "polyhal" / "modules").string();
}

const void* load_core_module(const ModuleNeed& need) {
  // Part of the plugin registry: each module is loaded once, under the lock.
  static std::mutex lock;
  static std::map<std::string, const void*> loaded;
  const std::scoped_lock guard(lock);
  if (const auto found = loaded.find(need.name); found != loaded.end()) return found->second;

  const std::filesystem::path file =
      std::filesystem::path(core_module_dir()) / fmt::format("libpolyhal-{}.so", need.name);
  const std::string package = fmt::format("polyhal-module-{}", need.name);
  auto fail = [&](const std::string& reason) {
    return PluginError(fmt::format(
        "{} needs polyhal's {} module, {}: {} (install the package {}, or build polyhal with "
        "-D{}=ON)",
        need.purpose, need.name, file.string(), reason, package, need.build_option));
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) throw fail("not installed");
  // The plugins' rules: a module others could replace is not loaded.
  if (const std::string problem =
          plugin_trust_problem(file.parent_path(), file, false, /*waivable=*/false);
      !problem.empty())
    throw PluginError(fmt::format("{}: {}", file.string(), problem));
  ::dlerror();
  // Global: Open MPI's own components, loaded by libmpi, resolve its symbols
  // in the global scope. Never closed: see core_module.hpp.
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* text = ::dlerror();
    throw fail(text != nullptr ? text : "the dynamic loader failed");
  }
  using Entry = const void*(const char*);
  auto* entry = reinterpret_cast<Entry*>(::dlsym(handle, kModuleEntryPoint));
  if (entry == nullptr) throw fail(fmt::format("no entry point '{}'", kModuleEntryPoint));
  const void* module = entry(POLYHAL_VERSION);
  if (module == nullptr)
    throw fail(fmt::format("built for another polyhal version than {}", POLYHAL_VERSION));
  loaded.emplace(need.name, module);
  return module;
}

}  // namespace polyhal::detail
