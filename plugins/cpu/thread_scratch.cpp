#include "thread_scratch.hpp"

#include <new>

namespace polyhal::cpu {

std::byte* ThreadScratch::get(std::uint64_t bytes) {
  const std::lock_guard lock(mutex_);
  Buffer& buffer = buffers_[std::this_thread::get_id()];
  if (buffer.bytes < bytes) {
    // Grown to the largest need seen on this thread, once per new maximum.
    constexpr std::uint64_t kAlign = 64;
    const std::uint64_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    buffer.storage.reset();
    buffer.bytes = 0;
    auto* storage = static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded));
    if (!storage) throw std::bad_alloc();
    buffer.storage.reset(storage);
    buffer.bytes = rounded;
  }
  return buffer.storage.get();
}

std::uint64_t ThreadScratch::held_bytes() {
  const std::lock_guard lock(mutex_);
  std::uint64_t total = 0;
  for (const auto& [id, buffer] : buffers_) total += buffer.bytes;
  return total;
}

}  // namespace polyhal::cpu
