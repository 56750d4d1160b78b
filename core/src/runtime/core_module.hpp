#pragma once
// polyhal's own parts that need a large library (Open MPI, HDF5) live in
// modules loaded on first use (inside libpolyhal, not installed), so that
// CPU inference installs and loads neither: libpolyhal-<name>.so in
// polyhal/modules beside libpolyhal itself (/usr/lib/<triplet>/polyhal/modules
// installed, <build>/core/polyhal/modules in a build), each from its own
// package (polyhal-module-<name>). POLYHAL_MODULE_DIR overrides the folder.
#include <string>

namespace polyhal::detail {

/// A module's entry point: `extern "C" const void* polyhal_module_entry(const char* version)`,
/// returning its interface when `version` is the version it was built for, else nullptr.
inline constexpr const char* kModuleEntryPoint = "polyhal_module_entry";

/// What a module is for, in the words of the error a user sees without it.
struct ModuleNeed {
  const char* name;          ///< "mpi": file libpolyhal-mpi.so, package polyhal-module-mpi
  const char* purpose;       ///< "running as MPI ranks (collective: mpi)"
  const char* build_option;  ///< the CMake option that builds it: "POLYHAL_MODULE_MPI"
};

/// The interface module `need.name` returns, loaded once per process and
/// kept loaded (a module's library, Open MPI above all, must not be unloaded
/// while the process runs). Throws PluginError naming the file, the reason
/// and the package to install.
const void* load_core_module(const ModuleNeed& need);

/// The folder modules are looked for in.
std::string core_module_dir();

}  // namespace polyhal::detail
