#pragma once
// The performance model shared by the device-model plugins: a roofline with
// an achievable fraction of peak and a fixed per-call overhead. Both constants
// are modelling assumptions (see each plugin), not calibrated on hardware.
#include <algorithm>

namespace polyhal::plugins {

struct Roofline {
  double peak_flops;           // datasheet peak for the dtype
  double memory_bandwidth;     // bytes/s
  double achievable_fraction;  // of peak, for large GEMMs
  double overhead_seconds;     // launch / sync per call
  /// Of the memory bandwidth, for streaming element-wise work.
  double bandwidth_fraction = 1.0;
  /// `vector_bytes`: a phase that does not overlap the matrix work (OpCost).
  double seconds(double flops, double bytes, double vector_bytes = 0) const {
    const double bandwidth = memory_bandwidth * bandwidth_fraction;
    return std::max(flops / (peak_flops * achievable_fraction), bytes / bandwidth) +
           vector_bytes / bandwidth + overhead_seconds;
  }
};

}  // namespace polyhal::plugins
