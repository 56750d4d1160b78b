#include "polyhal/app/serve_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace polyhal::serve {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  const std::scoped_lock lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

std::string Histogram::text(const std::string& name, const std::string& help) const {
  const std::scoped_lock lock(mutex_);
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative,
                     name, sum_, name, count_);
  return out;
}

ServeMetrics::ServeMetrics()
    : latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      batch_texts_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
      batch_tokens_({64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768}) {}

void ServeMetrics::answered(const std::string& endpoint, int status, double seconds) {
  {
    const std::scoped_lock lock(mutex_);
    ++requests_[{endpoint, status}];
  }
  latency_.observe(seconds);
}

void ServeMetrics::batch(std::int64_t texts, std::int64_t tokens, double seconds) {
  batches_ += 1;
  texts_ += static_cast<std::uint64_t>(texts);
  tokens_ += static_cast<std::uint64_t>(tokens);
  model_seconds_ += seconds;
  batch_texts_.observe(static_cast<double>(texts));
  batch_tokens_.observe(static_cast<double>(tokens));
}

std::string ServeMetrics::text() const {
  std::string out =
      "# HELP polyhal_requests_total Requests answered, by endpoint and HTTP status.\n"
      "# TYPE polyhal_requests_total counter\n";
  std::uint64_t errors = 0;
  {
    const std::scoped_lock lock(mutex_);
    for (const auto& [key, count] : requests_) {
      out += fmt::format("polyhal_requests_total{{endpoint=\"{}\",code=\"{}\"}} {}\n", key.first,
                         key.second, count);
      if (key.second >= 400) errors += count;
    }
  }
  const double seconds = model_seconds_.load();
  out += fmt::format(
      "# HELP polyhal_request_errors_total Requests answered with a status of 400 or more.\n"
      "# TYPE polyhal_request_errors_total counter\npolyhal_request_errors_total {}\n"
      "# HELP polyhal_queue_depth Requests waiting for or in a batch.\n"
      "# TYPE polyhal_queue_depth gauge\npolyhal_queue_depth {}\n"
      "# HELP polyhal_requests_in_flight Requests read and not yet answered.\n"
      "# TYPE polyhal_requests_in_flight gauge\npolyhal_requests_in_flight {}\n"
      "# HELP polyhal_open_connections Client connections open.\n"
      "# TYPE polyhal_open_connections gauge\npolyhal_open_connections {}\n"
      "# HELP polyhal_connection_failures_total Connections ended by a fault on their own path.\n"
      "# TYPE polyhal_connection_failures_total counter\npolyhal_connection_failures_total {}\n"
      "# HELP polyhal_accept_failures_total Accepts that failed (out of descriptors), each "
      "paused.\n"
      "# TYPE polyhal_accept_failures_total counter\npolyhal_accept_failures_total {}\n"
      "# HELP polyhal_batches_total Batches the model ran.\n"
      "# TYPE polyhal_batches_total counter\npolyhal_batches_total {}\n"
      "# HELP polyhal_texts_total Texts embedded.\n"
      "# TYPE polyhal_texts_total counter\npolyhal_texts_total {}\n"
      "# HELP polyhal_tokens_total Real tokens embedded (no padding: rows are packed).\n"
      "# TYPE polyhal_tokens_total counter\npolyhal_tokens_total {}\n"
      "# HELP polyhal_model_seconds_total Seconds the model spent on batches.\n"
      "# TYPE polyhal_model_seconds_total counter\npolyhal_model_seconds_total {}\n"
      "# HELP polyhal_model_tokens_per_second Real tokens per second of model time so far.\n"
      "# TYPE polyhal_model_tokens_per_second gauge\npolyhal_model_tokens_per_second {}\n",
      errors, queue_depth.load(), in_flight.load(), connections.load(), connection_failures.load(),
      accept_failures.load(), batches_.load(), texts_.load(), tokens_.load(), seconds,
      seconds > 0 ? static_cast<double>(tokens_.load()) / seconds : 0.0);
  out += latency_.text("polyhal_request_seconds", "Time from a request's arrival to its answer.");
  out += batch_texts_.text("polyhal_batch_texts", "Texts per batch.");
  out += batch_tokens_.text("polyhal_batch_tokens", "Real tokens per batch.");
  return out;
}

}  // namespace polyhal::serve
