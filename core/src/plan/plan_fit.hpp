#pragma once
// A run starts only on a plan that fits: what validate and --compile-only
// report as not fitting, run refuses before allocating (exit 1, as the
// allocation would have failed), rather than meeting bad_alloc or the
// out-of-memory killer part way.
#include "polyhal/device.hpp"

namespace polyhal {

/// Throws RuntimeFailure naming the device, what the plan needs and what it
/// has, when `memory` does not fit.
void require_plan_fits(const MemoryReport& memory);

}  // namespace polyhal
