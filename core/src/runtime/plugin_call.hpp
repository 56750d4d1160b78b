#pragma once
// Calls into a plugin's code (inside libpolyhal, not installed): a plugin
// may throw anything, but only std::exception may reach the host.
#include <exception>
#include <string>
#include <utility>

#include "polyhal/error.hpp"

namespace polyhal::detail {

/// f(), with an exception of a type that is not a std::exception (a
/// plugin's own) turned into RuntimeFailure("<what> threw an exception of
/// unknown type (not a std::exception): a fault of <whose> plugin").
template <class F>
auto call_into_plugin(F&& f, const std::string& what, const std::string& whose) -> decltype(f()) {
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
