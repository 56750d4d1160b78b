#pragma once
/// @file serve_metrics.hpp
// What `polyhal serve` counts, shown at GET /metrics in the Prometheus text
// format: requests and errors by endpoint and status, the queue's depth,
// batch sizes in texts and tokens, request latency, tokens served.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal::serve {

/// Cumulative buckets of one observed quantity.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  /// Prometheus lines for `name` (its _bucket, _sum and _count).
  std::string text(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<std::uint64_t> counts_;  // per bucket, +Inf last
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

class ServeMetrics {
 public:
  ServeMetrics();
  void answered(const std::string& endpoint, int status, double seconds);
  void batch(std::int64_t texts, std::int64_t tokens, double seconds);
  std::atomic<std::int64_t> queue_depth{0};
  std::atomic<std::int64_t> connections{0};
  std::atomic<std::int64_t> in_flight{0};  ///< requests read and not yet answered
  /// Connections ended by an exception on their own read or write path.
  std::atomic<std::uint64_t> connection_failures{0};
  /// Accepts that failed (out of descriptors: EMFILE, ENFILE), each followed by a pause.
  std::atomic<std::uint64_t> accept_failures{0};
  /// The whole page.
  std::string text() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::atomic<std::uint64_t> tokens_{0}, texts_{0}, batches_{0};
  std::atomic<double> model_seconds_{0};
  Histogram latency_, batch_texts_, batch_tokens_;
};

}  // namespace polyhal::serve
