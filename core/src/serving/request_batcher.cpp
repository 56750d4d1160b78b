#include "polyhal/app/request_batcher.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace polyhal::serve {

std::int64_t BatchJob::tokens() const {
  std::int64_t n = 0;
  for (const auto& t : texts) n += static_cast<std::int64_t>(t.ids.size());
  return n;
}

RequestBatcher::RequestBatcher(std::vector<std::vector<ServedModel*>> replicas,
                               const ServeSettings& settings, ServeMetrics& metrics)
    : settings_(settings),
      metrics_(metrics),
      held_(replicas.empty() ? 0 : replicas.front().size(), 0) {
  for (auto& models : replicas)
    workers_.emplace_back([this, models = std::move(models)] { work(models); });
}

RequestBatcher::~RequestBatcher() {
  drain();
  {
    const std::scoped_lock lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void RequestBatcher::publish_depth() {
  metrics_.queue_depth = static_cast<std::int64_t>(queue_.size()) + running_;
}

bool RequestBatcher::submit(BatchJob&& job) {
  {
    const std::scoped_lock lock(mutex_);
    if (draining_ || job.model >= held_.size() ||
        static_cast<std::int64_t>(queue_.size()) + running_ >= settings_.max_queue)
      return false;
    // Each model's share of the queue, so that one cannot fill another's room.
    const auto models = static_cast<std::int64_t>(held_.size());
    if (held_[job.model] >= (settings_.max_queue + models - 1) / models) return false;
    ++held_[job.model];
    queued_tokens_ += job.tokens();
    queue_.push_back(std::move(job));
    publish_depth();
  }
  wake_.notify_all();
  return true;
}

void RequestBatcher::drain() {
  std::unique_lock lock(mutex_);
  draining_ = true;
  idle_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
}

bool RequestBatcher::drain_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  return idle_.wait_until(lock, deadline, [this] { return queue_.empty() && running_ == 0; });
}

void RequestBatcher::abandon() {
  std::deque<BatchJob> dropped;
  {
    const std::scoped_lock lock(mutex_);
    draining_ = true;
    dropped.swap(queue_);
    for (const auto& job : dropped) --held_[job.model];
    queued_tokens_ = 0;
    publish_depth();
  }
  idle_.notify_all();
  for (auto& job : dropped) job.done({}, "the server is stopping");
}

std::size_t RequestBatcher::next_model() const {
  const std::size_t models = held_.size();
  for (std::size_t step = 1; step <= models; ++step) {
    const std::size_t m = (last_model_ + step) % models;
    for (const auto& job : queue_)
      if (job.model == m) return m;
  }
  return queue_.front().model;
}

std::vector<BatchJob> RequestBatcher::next_batch(std::unique_lock<std::mutex>& lock) {
  // The oldest request may wait max_wait_ms for company, unless its batch is
  // full already.
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::microseconds(static_cast<std::int64_t>(settings_.max_wait_ms * 1000.0));
  wake_.wait_until(lock, deadline, [&] {
    return stopping_ || queue_.empty() || queued_tokens_ >= settings_.max_batch_tokens;
  });
  std::vector<BatchJob> batch;
  if (queue_.empty()) return batch;
  const std::size_t model = next_model();
  last_model_ = model;
  std::int64_t tokens = 0;
  // That model's jobs in order; the others keep their places.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->model != model) {
      ++it;
      continue;
    }
    const std::int64_t next = it->tokens();
    if (!batch.empty() &&
        (tokens + next > settings_.max_batch_tokens || it->output != batch.front().output))
      break;
    tokens += next;
    queued_tokens_ -= next;
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  return batch;
}

void RequestBatcher::work(const std::vector<ServedModel*>& models) {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::vector<BatchJob> batch = next_batch(lock);
    if (batch.empty()) continue;  // another replica took them
    running_ += static_cast<std::int64_t>(batch.size());
    const std::size_t which = batch.front().model;
    ServedModel& model = *models.at(which);
    lock.unlock();
    std::vector<ServedModel::Text> texts;
    for (const auto& job : batch) texts.insert(texts.end(), job.texts.begin(), job.texts.end());
    std::vector<std::vector<float>> outputs;
    std::string error;
    const auto start = std::chrono::steady_clock::now();
    try {
      outputs = model.run(texts, batch.front().output);
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
          mine.push_back(std::move(outputs[at + i]));
      at += job.texts.size();
      job.done(std::move(mine), error);
    }
    lock.lock();
    running_ -= static_cast<std::int64_t>(batch.size());
    held_[which] -= static_cast<std::int64_t>(batch.size());
    publish_depth();
    if (queue_.empty() && running_ == 0) idle_.notify_all();
  }
}

}  // namespace polyhal::serve
