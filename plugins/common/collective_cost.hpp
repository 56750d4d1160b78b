#pragma once
// Modelled all-reduce time for device models (op "all_reduce" in
// Device::estimate_seconds: input_shapes {{elements}}, dtype, attr replicas).
// Bandwidth-optimal reduce-scatter + all-gather: each device sends and
// receives 2(n-1)/n of the buffer over its links, plus a fixed latency per
// algorithm step. Link figures come from the plugin's datasheet table; the
// efficiency and latencies are assumptions, documented where they are set.
#include <cstdint>

namespace polyhal::plugins {

struct LinkModel {
  double bytes_per_second;  // per device, each direction
  double efficiency;        // achievable fraction of that
  double step_latency;      // seconds per algorithm step
};

/// Reduce-scatter + all-gather of `bytes` over `replicas` devices on `link`,
/// in `steps` latency-bound steps (2(n-1) for a ring, 2 for all-to-all).
inline double all_reduce_seconds(double bytes, std::int64_t replicas, const LinkModel& link,
                                 std::int64_t steps) {
  if (replicas <= 1) return 0.0;
  const double n = static_cast<double>(replicas);
  return 2.0 * (n - 1.0) / n * bytes / (link.bytes_per_second * link.efficiency) +
         static_cast<double>(steps) * link.step_latency;
}

/// A step's inputs from the host over `link` (op "host_transfer":
/// input_shapes {{elements}} of the desc's dtype): one transfer.
inline double host_transfer_seconds(double bytes, const LinkModel& link) {
  return bytes / (link.bytes_per_second * link.efficiency) + link.step_latency;
}

}  // namespace polyhal::plugins
