#include "train/overlapped_all_reduce.hpp"

#include <algorithm>
#include <chrono>

namespace polyhal {

OverlappedAllReduce::OverlappedAllReduce(Communicator& replicas,
                                         std::vector<GradientToReduce> gradients,
                                         std::size_t bucket_bytes)
    : replicas_(replicas), gradients_(std::move(gradients)) {
  std::stable_sort(gradients_.begin(), gradients_.end(),
                   [](const auto& a, const auto& b) { return a.last_writer < b.last_writer; });
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < gradients_.size(); ++i) {
    bytes += gradients_[i].count * sizeof(float);
    if (bytes >= bucket_bytes || i + 1 == gradients_.size()) {
      bucket_end_.push_back(i + 1);
      bytes = 0;
    }
  }
  thread_ = std::thread([this] { communicate(); });
}

OverlappedAllReduce::~OverlappedAllReduce() {
  if (!thread_.joinable()) return;
  {  // backward failed: what is not handed over yet is left unreduced
    std::lock_guard lock(mutex_);
    finishing_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void OverlappedAllReduce::before_op(std::size_t op) {
  std::size_t ready = handed_;
  while (ready < bucket_end_.size() && gradients_[bucket_end_[ready] - 1].last_writer < op) ++ready;
  if (ready == handed_) return;
  handed_ = ready;
  {
    std::lock_guard lock(mutex_);
    released_ = ready;
  }
  changed_.notify_all();
}

double OverlappedAllReduce::finish() {
  const auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    finishing_ = true;
    released_ = bucket_end_.size();
  }
  changed_.notify_all();
  thread_.join();
  if (failure_) std::rethrow_exception(failure_);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void OverlappedAllReduce::communicate() {
  std::size_t done = 0;  // buckets reduced
  try {
    while (done < bucket_end_.size()) {
      std::size_t until = 0;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return released_ > done || finishing_; });
        until = released_;
      }
      if (until == done) break;  // abandoned (see the destructor)
      for (; done < until; ++done) {
        const std::size_t first = done == 0 ? 0 : bucket_end_[done - 1];
        for (std::size_t g = first; g < bucket_end_[done]; ++g) {
          replicas_.set_purpose("gradient of " + gradients_[g].name);
          replicas_.all_reduce(gradients_[g].values, gradients_[g].count, DType::f32,
                               ReduceOp::mean);
        }
      }
    }
  } catch (...) {
    // The other replicas meet the same failure in their own collective.
    failure_ = std::current_exception();
  }
}

}  // namespace polyhal
