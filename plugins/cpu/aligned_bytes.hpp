#pragma once
// Cache-line-aligned storage of the CPU plugin's kernels (run_scratch.hpp,
// thread_scratch.hpp): 64 bytes, as oneDNN's own allocations.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace polyhal::cpu {

constexpr std::uint64_t kCacheLine = 64;

/// `bytes` rounded up to a whole number of cache lines.
constexpr std::uint64_t cache_lines(std::uint64_t bytes) {
  return (bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
}

struct FreeAligned {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte, FreeAligned>;

/// At least `bytes` bytes (whole cache lines), cache-line aligned; throws
/// std::bad_alloc.
inline AlignedBytes allocate_aligned(std::uint64_t bytes) {
  auto* storage = static_cast<std::byte*>(std::aligned_alloc(kCacheLine, cache_lines(bytes)));
  if (!storage) throw std::bad_alloc();
  return AlignedBytes(storage);
}

}  // namespace polyhal::cpu
