#pragma once
// Gradients all-reduced while backward still runs, as PyTorch DDP does:
// gradients are grouped, in the order backward finishes them, into buckets
// of about `bucket_bytes`, and a communication thread reduces each bucket as
// soon as the last op writing any of its tensors has run.
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "polyhal/collective.hpp"

namespace polyhal {

/// One gradient to reduce: its f32 values in place, and the index of the
/// last backward op that writes it (its values are final once that op ran).
struct GradientToReduce {
  float* values = nullptr;
  std::size_t count = 0;
  std::string name;
  std::size_t last_writer = 0;
};

/// One backward pass's reduction. Each tensor is still reduced by its own
/// all_reduce (mean), with the count it always had: a reduction's result
/// depends only on its data and size, never on when it is called, so the
/// values are bit-identical to reducing after backward, on every engine.
/// The communicator is used only by this object's thread between start and
/// finish(); the caller must make no other collective call meanwhile.
class OverlappedAllReduce {
 public:
  OverlappedAllReduce(Communicator& replicas, std::vector<GradientToReduce> gradients,
                      std::size_t bucket_bytes);
  ~OverlappedAllReduce();
  OverlappedAllReduce(const OverlappedAllReduce&) = delete;
  OverlappedAllReduce& operator=(const OverlappedAllReduce&) = delete;

  /// Backward is about to run op `op`: every bucket whose tensors are all
  /// written by earlier ops goes to the communication thread.
  void before_op(std::size_t op);
  /// Backward has run: hands over the rest, waits for every reduction and
  /// rethrows the first failure of the communication thread. Returns the
  /// seconds spent waiting here (the communication backward did not hide).
  double finish();
  /// Buckets the gradients were grouped into.
  std::size_t buckets() const noexcept { return bucket_end_.size(); }

 private:
  void communicate();

  Communicator& replicas_;
  std::vector<GradientToReduce> gradients_;  // in the order backward finishes them
  std::vector<std::size_t> bucket_end_;      // one past each bucket's last gradient
  std::size_t handed_ = 0;                   // buckets given to the thread
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t released_ = 0;  // buckets the thread may reduce
  bool finishing_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace polyhal
