#pragma once
// A device model multiplies a linear the way its hardware can, or refuses:
// the reference kernel could emulate int8 or bf16 products on any device,
// which would be a silent claim about hardware that has no such units.
#include <fmt/format.h>

#include <functional>
#include <string>

#include "polyhal/error.hpp"
#include "polyhal/kernel.hpp"

namespace polyhal::plugins {

/// Wraps every linear factory in `registry`: a LinearMath for which
/// `refusal(math)` gives a reason is refused with KernelNotFoundError at
/// prepare; the others go to the factory that was registered.
inline void refuse_linear_math(KernelRegistry& registry,
                               std::function<std::string(LinearMath)> refusal) {
  for (DType type : registry.dtypes_for(OpKind::linear)) {
    KernelFactory inner = *registry.find(OpKind::linear, type);
    registry.add(OpKind::linear, type, [inner, refusal](const KernelDesc& desc, Device& device) {
      const LinearMath math = desc.attrs_as<LinearAttrs>().math;
      if (const std::string why = refusal(math); !why.empty())
        throw KernelNotFoundError(fmt::format("{}: {}", desc.to_string(), why));
      return inner(desc, device);
    });
  }
}

}  // namespace polyhal::plugins
