#include "plan/plan_fit.hpp"

#include <fmt/format.h>

#include "polyhal/error.hpp"

namespace polyhal {

void require_plan_fits(const MemoryReport& memory) {
  if (memory.fits) return;
  const auto mib = [](std::uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  throw RuntimeFailure(fmt::format(
      "the plan needs {:.1f} MiB on {}, which has {:.1f} MiB for it: it does not fit, and "
      "nothing was allocated; `polyhal validate` with this config lists the plan and what to "
      "change",
      mib(memory.required_bytes), memory.device, mib(memory.capacity_bytes)));
}

}  // namespace polyhal
