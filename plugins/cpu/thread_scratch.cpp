#include "thread_scratch.hpp"

namespace polyhal::cpu {

std::byte* ThreadScratch::get(std::uint64_t bytes) {
  const std::lock_guard lock(mutex_);
  Buffer& buffer = buffers_[std::this_thread::get_id()];
  if (buffer.bytes < bytes) {
    // Grown to the largest need seen on this thread, once per new maximum;
    // the old buffer goes first, so the two are never held together.
    buffer.storage.reset();
    buffer.bytes = 0;
    buffer.storage = allocate_aligned(bytes);
    buffer.bytes = cache_lines(bytes);
  }
  return buffer.storage.get();
}

}  // namespace polyhal::cpu
