#pragma once
// One queue of embedding requests in front of one model: a worker thread
// takes the oldest request, waits up to serve.max_wait_ms for others while
// their tokens fit serve.max_batch_tokens, runs them as one packed batch
// (TextEmbedder), and answers each request as soon as its batch is done.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "polyhal/app/serve_settings.hpp"
#include "polyhal/app/text_embedder.hpp"
#include "serve/serve_metrics.hpp"

namespace polyhal::serve {

struct EmbedJob {
  std::vector<TextEmbedder::Text> texts;
  /// Called once on the worker thread: the embeddings in order, or an error
  /// message (then `embeddings` is empty).
  std::function<void(std::vector<std::vector<float>> embeddings, const std::string& error)> done;
  std::int64_t tokens() const;
};

class EmbedBatcher {
 public:
  EmbedBatcher(TextEmbedder& model, const ServeSettings& settings, ServeMetrics& metrics);
  /// Answers what is queued, then stops.
  ~EmbedBatcher();
  EmbedBatcher(const EmbedBatcher&) = delete;
  EmbedBatcher& operator=(const EmbedBatcher&) = delete;

  /// Queues `job`; false (job untouched) when serve.max_queue requests wait
  /// already or the batcher is draining.
  bool submit(EmbedJob&& job);
  /// Refuses new jobs; returns once every queued job was answered.
  void drain();

 private:
  void work();
  /// The jobs of the next batch: the oldest, and more while they fit.
  std::vector<EmbedJob> next_batch(std::unique_lock<std::mutex>& lock);

  TextEmbedder& model_;
  const ServeSettings& settings_;
  ServeMetrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<EmbedJob> queue_;
  std::int64_t running_ = 0;
  bool draining_ = false, stopping_ = false;
  std::thread worker_;
};

}  // namespace polyhal::serve
