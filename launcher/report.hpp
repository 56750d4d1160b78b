#pragma once
// Text the launcher's tasks print: sizes, memory plans, clocks.
#include <cstdint>
#include <string>

#include "polyhal/device.hpp"

namespace polyhal::launcher {

/// "12.3 MiB".
std::string mib(std::uint64_t bytes);
/// The plan, one line per item, and its notes.
void print_memory(const MemoryReport& report);
/// "X MiB of Y MiB on dev: fits" (validate's one-line plan).
std::string fit_summary(const MemoryReport& memory);
/// "h:mm:ss".
std::string clock_text(double seconds);

}  // namespace polyhal::launcher
