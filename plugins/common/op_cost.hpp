#pragma once
// FLOPs and bytes moved by one run of a kernel, for the device models'
// rooflines. Derived from the op contracts in polyhal/kernel.hpp.
#include <cstdint>

#include "polyhal/kernel.hpp"

namespace polyhal::plugins {

struct OpCost {
  double flops = 0;     // on the matrix engine (0 for element-wise ops)
  double bytes = 0;     // read and written at least once
  bool matrix = false;  // matmul-like: runs on the AMP/MME units
};

inline OpCost op_cost(const KernelDesc& desc) {
  const double element = static_cast<double>(dtype_size(desc.dtype));
  auto numel = [&](std::size_t i) {
    return static_cast<double>(element_count(desc.input_shapes.at(i)));
  };
  if (desc.op == OpKind::matmul) {
    const double m = static_cast<double>(desc.input_shapes[0][0]),
                 k = static_cast<double>(desc.input_shapes[0][1]);
    const double n = static_cast<double>(desc.input_shapes[1][1]);
    return {2 * m * n * k, (m * k + k * n + m * n) * element, true};
  }
  if (desc.op == OpKind::linear) {
    const double m = static_cast<double>(desc.input_shapes[0][0]),
                 k = static_cast<double>(desc.input_shapes[0][1]);
    const double n = static_cast<double>(desc.attrs_as<LinearAttrs>().out_features);
    return {2 * m * n * k, (m * k + k * n + m * n) * element, true};
  }
  if (desc.op == OpKind::attention) {
    const double tokens = static_cast<double>(desc.input_shapes[0][0]);
    const double hidden = static_cast<double>(desc.input_shapes[0][1]) / 3;
    const double seq = static_cast<double>(desc.attrs_as<AttentionAttrs>().seq);
    return {4 * tokens * seq * hidden, 4 * tokens * hidden * element, true};
  }
  double bytes = 0;
  for (std::size_t i = 0; i < desc.input_shapes.size(); ++i) bytes += numel(i) * element;
  return {0, 2 * bytes, false};  // element-wise: read inputs, write as much
}

}  // namespace polyhal::plugins
