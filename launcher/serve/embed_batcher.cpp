#include "serve/embed_batcher.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace polyhal::serve {

std::int64_t EmbedJob::tokens() const {
  std::int64_t n = 0;
  for (const auto& t : texts) n += static_cast<std::int64_t>(t.ids.size());
  return n;
}

EmbedBatcher::EmbedBatcher(TextEmbedder& model, const ServeSettings& settings,
                           ServeMetrics& metrics)
    : model_(model), settings_(settings), metrics_(metrics), worker_([this] { work(); }) {}

EmbedBatcher::~EmbedBatcher() {
  drain();
  {
    const std::scoped_lock lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

bool EmbedBatcher::submit(EmbedJob&& job) {
  {
    const std::scoped_lock lock(mutex_);
    if (draining_ || static_cast<std::int64_t>(queue_.size()) + running_ >= settings_.max_queue)
      return false;
    queue_.push_back(std::move(job));
    metrics_.queue_depth = static_cast<std::int64_t>(queue_.size()) + running_;
  }
  wake_.notify_one();
  return true;
}

void EmbedBatcher::drain() {
  std::unique_lock lock(mutex_);
  draining_ = true;
  idle_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
}

std::vector<EmbedJob> EmbedBatcher::next_batch(std::unique_lock<std::mutex>& lock) {
  // The oldest request may wait max_wait_ms from its arrival for company.
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::microseconds(static_cast<std::int64_t>(settings_.max_wait_ms * 1000.0));
  const auto room = [&] {
    std::int64_t tokens = 0;
    for (const auto& job : queue_) tokens += job.tokens();
    return tokens < settings_.max_batch_tokens;
  };
  wake_.wait_until(lock, deadline, [&] { return stopping_ || !room(); });
  std::vector<EmbedJob> batch;
  std::int64_t tokens = 0;
  while (!queue_.empty()) {
    const std::int64_t next = queue_.front().tokens();
    if (!batch.empty() && tokens + next > settings_.max_batch_tokens) break;
    tokens += next;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

void EmbedBatcher::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::vector<EmbedJob> batch = next_batch(lock);
    running_ = static_cast<std::int64_t>(batch.size());
    lock.unlock();
    std::vector<TextEmbedder::Text> texts;
    for (const auto& job : batch) texts.insert(texts.end(), job.texts.begin(), job.texts.end());
    std::vector<std::vector<float>> embeddings;
    std::string error;
    const auto start = std::chrono::steady_clock::now();
    try {
      embeddings = model_.embed(texts);
    } catch (const std::exception& e) {
      error = e.what();
      spdlog::error("serve: a batch of {} texts failed: {}", texts.size(), error);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::int64_t tokens = 0;
    for (const auto& job : batch) tokens += job.tokens();
    if (error.empty()) metrics_.batch(static_cast<std::int64_t>(texts.size()), tokens, seconds);
    std::size_t at = 0;
    for (auto& job : batch) {
      std::vector<std::vector<float>> mine;
      if (error.empty())
        for (std::size_t i = 0; i < job.texts.size(); ++i)
          mine.push_back(std::move(embeddings[at + i]));
      at += job.texts.size();
      job.done(std::move(mine), error);
    }
    lock.lock();
    running_ = 0;
    metrics_.queue_depth = static_cast<std::int64_t>(queue_.size());
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace polyhal::serve
