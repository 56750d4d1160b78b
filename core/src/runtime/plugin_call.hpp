#pragma once
// Calls into a plugin's code (inside libpolyhal, not installed): a plugin
// may throw anything, but only std::exception may reach the host.
#include <exception>
#include <string>
#include <utility>

#include "polyhal/error.hpp"

namespace polyhal::detail {

/// While alive, a plugin that ends the process itself (exit(), quick_exit())
/// does not end it with its own status and no word: the process prints
/// "polyhal: error: <what>: the plugin <file> ended the process ..." and
/// exits 1. `object` is one of the plugin's objects (its vtable names the
/// library file).
class PluginExitGuard {
 public:
  PluginExitGuard(const std::string& what, const void* object);
  ~PluginExitGuard();
  PluginExitGuard(const PluginExitGuard&) = delete;
  PluginExitGuard& operator=(const PluginExitGuard&) = delete;
};

/// f(), with an exception of a type that is not a std::exception (a
/// plugin's own) turned into RuntimeFailure("<what> threw an exception of
/// unknown type (not a std::exception): a fault of <whose> plugin"), and an
/// exit() inside it reported (PluginExitGuard).
template <class F>
auto call_into_plugin(F&& f, const std::string& what, const std::string& whose,
                      const void* object = nullptr) -> decltype(f()) {
  const PluginExitGuard guard(what, object);
  try {
    return std::forward<F>(f)();
  } catch (const std::exception&) {
    throw;
  } catch (...) {
    throw RuntimeFailure(what +
                         " threw an exception of unknown type (not a std::exception): a "
                         "fault of " +
                         whose + " plugin");
  }
}

}  // namespace polyhal::detail
