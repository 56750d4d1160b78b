#pragma once
/// @file request_batcher.hpp
// One queue of requests in front of the served models' replicas: a worker
// thread per replica takes the oldest request, waits up to
// serve.max_wait_ms for others while their tokens fit serve.max_batch_tokens,
// runs them as one packed batch (ServedModel::run), and answers each request
// as soon as its batch is done. With several models (serve.models) every
// worker holds a replica of each; a batch is of one model, and the models
// with requests waiting take turns: between two batches of one model, each
// other model with a request waiting runs one batch (of serve.max_batch_tokens
// at most). A model holds at most its share of serve.max_queue (the queue
// divided by the models, rounded up): a flood of one model's requests is
// answered 429 beyond it and never takes another's room.
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
  std::size_t model = 0;  ///< which of the served models (their order in serve.models)
  /// What the model returns per text; a batch holds jobs of one kind.
  ServedModel::Output output = ServedModel::Output::head;
  /// Called once on a worker thread: the model's output per text in order,
  /// or an error message (then `outputs` is empty).
  std::function<void(std::vector<std::vector<float>> outputs, const std::string& error)> done;
  std::int64_t tokens() const;
};

class RequestBatcher {
 public:
  /// One worker per entry of `replicas`, each a replica of every served
  /// model (replicas[w][m]: worker w's copy of model m, all workers alike).
  RequestBatcher(std::vector<std::vector<ServedModel*>> replicas, const ServeSettings& settings,
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
  void work(const std::vector<ServedModel*>& models);
  /// The jobs of the next batch: the oldest of the model whose turn it is,
  /// and more of that model while they fit.
  std::vector<BatchJob> next_batch(std::unique_lock<std::mutex>& lock);
  /// The model that runs next: after `last_model_`, the first with a job
  /// waiting (with mutex_ held and the queue not empty).
  std::size_t next_model() const;
  void publish_depth();  // with mutex_ held

  const ServeSettings& settings_;
  ServeMetrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<BatchJob> queue_;
  std::int64_t queued_tokens_ = 0;
  std::int64_t running_ = 0;        ///< requests in batches on the replicas
  std::vector<std::int64_t> held_;  ///< per model: requests waiting or running
  std::size_t last_model_ = 0;      ///< the model of the last batch taken
  bool draining_ = false, stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace polyhal::serve
