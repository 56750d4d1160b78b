#pragma once
/// @file request_batcher.hpp
// One queue of requests in front of the served model's replicas: a worker
// thread per replica takes the oldest request, waits up to
// serve.max_wait_ms for others while their tokens fit serve.max_batch_tokens,
// runs them as one packed batch (ServedModel::run), and answers each request
// as soon as its batch is done.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/serve_metrics.hpp"
#include "polyhal/app/serve_settings.hpp"
#include "polyhal/app/served_model.hpp"

namespace polyhal::serve {

struct BatchJob {
  std::vector<ServedModel::Text> texts;
  /// What the model returns per text; a batch holds jobs of one kind.
  ServedModel::Output output = ServedModel::Output::head;
  /// Called once on a worker thread: the model's output per text in order,
  /// or an error message (then `outputs` is empty).
  std::function<void(std::vector<std::vector<float>> outputs, const std::string& error)> done;
  std::int64_t tokens() const;
};

class RequestBatcher {
 public:
  /// One worker per model in `replicas` (each a ServedModel of the same config).
  RequestBatcher(std::vector<ServedModel*> replicas, const ServeSettings& settings,
                 ServeMetrics& metrics);
  /// Answers what is queued, then stops.
  ~RequestBatcher();
  RequestBatcher(const RequestBatcher&) = delete;
  RequestBatcher& operator=(const RequestBatcher&) = delete;

  /// Queues `job`; false (job untouched) when serve.max_queue requests wait
  /// already or the batcher is draining.
  bool submit(BatchJob&& job);
  /// Refuses new jobs; returns once every queued job was answered.
  void drain();
  /// The same until `deadline`; false when jobs were still queued or running then.
  bool drain_until(std::chrono::steady_clock::time_point deadline);
  /// Answers every queued job with an error ("the server is stopping")
  /// without running it; the batches running finish.
  void abandon();

 private:
  void work(ServedModel& model);
  /// The jobs of the next batch: the oldest, and more while they fit.
  std::vector<BatchJob> next_batch(std::unique_lock<std::mutex>& lock);
  void publish_depth();  // with mutex_ held

  const ServeSettings& settings_;
  ServeMetrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<BatchJob> queue_;
  std::int64_t queued_tokens_ = 0;
  std::int64_t running_ = 0;  ///< requests in batches on the replicas
  bool draining_ = false, stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace polyhal::serve
