#pragma once
// Memory a kernel uses only inside one run() (the quantised input of an
// int8 linear, oneDNN's scratchpad), shared by all kernels of a device that
// run on the same thread. A server prepares its model in many shapes; each
// shape's kernels holding their own would grow the process to gigabytes as
// batches of new sizes arrive (bert-base at int8: 5 GB after 158 requests),
// though only one kernel runs at a time on a thread. Replicas run on
// threads of their own, so each calling thread has its own buffer. The
// memory plan counts the kernels' own memory only: this adds one kernel's
// run memory per thread (tens of MB at BERT-base's largest shapes).
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include "aligned_bytes.hpp"

namespace polyhal::cpu {

class ThreadScratch {
 public:
  /// At least `bytes` bytes, 64-byte aligned, for the calling thread: valid
  /// until this thread's next call (a kernel sets its memories' handles at
  /// the start of each run).
  std::byte* get(std::uint64_t bytes);

 private:
  struct Buffer {
    AlignedBytes storage;
    std::uint64_t bytes = 0;
  };
  std::mutex mutex_;
  std::map<std::thread::id, Buffer> buffers_;
};

/// Carves a run's pieces out of one ThreadScratch buffer: add() each size,
/// then bytes() to get that buffer and at() for each piece's start.
class ScratchLayout {
 public:
  /// The offset of a piece of `bytes` bytes, cache-line aligned.
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t at = end_;
    end_ += cache_lines(bytes);
    return at;
  }
  std::uint64_t bytes() const { return end_; }

 private:
  std::uint64_t end_ = 0;
};

}  // namespace polyhal::cpu
