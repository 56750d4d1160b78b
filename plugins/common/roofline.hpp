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
  double seconds(double flops, double bytes) const {
    return std::max(flops / (peak_flops * achievable_fraction), bytes / memory_bandwidth) +
           overhead_seconds;
  }
};

}  // namespace polyhal::plugins
