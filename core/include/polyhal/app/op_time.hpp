#pragma once
/// @file op_time.hpp
/// Host wall time per kind of op, as a program's profile reports it.
#include <cstdint>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// Wall time spent in one kind of op over every call so far.
struct OpTime {
  std::string op;              ///< kernel op name, or "optimizer" for the update
  std::string implementation;  ///< Kernel::implementation() of the first such kernel
  std::int64_t calls = 0;
  double seconds = 0;
};

}  // namespace polyhal
