#pragma once
/// @file parallel.hpp
/// The thread pool a kernel library runs on, as a value. The reference
/// training kernels are written once against ParallelFor; the default runs
/// them on oneTBB, the CPU plugin on the OpenMP pool oneDNN already keeps
/// warm (two spinning pools on the same cores slow each other down).
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace polyhal {

/// body(begin, end) over disjoint ranges that cover [0, count).
using RangeBody = std::function<void(std::int64_t begin, std::int64_t end)>;

/// Calls `body` over ranges covering [0, count), possibly concurrently, and
/// returns when every range is done. How [0, count) is split is the pool's
/// choice: a body must give the same result for any split.
using ParallelFor = std::function<void(std::int64_t count, const RangeBody& body)>;

/// oneTBB's parallel_for with its automatic partitioner.
ParallelFor tbb_parallel_for();

/// Sums of chunk(begin, end) (N values each) over fixed chunks of `grain`
/// elements, added in chunk order: the result does not depend on the thread
/// count or the split, so a resumed run repeats an uninterrupted one bit for
/// bit.
template <std::size_t N, class Chunk>
std::array<double, N> deterministic_sums(const ParallelFor& parallel, std::int64_t count,
                                         std::int64_t grain, Chunk chunk) {
  std::array<double, N> total{};
  if (count <= 0) return total;
  const std::int64_t chunks = (count + grain - 1) / grain;
  std::vector<std::array<double, N>> partial(static_cast<std::size_t>(chunks));
  parallel(chunks, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t c = first; c < last; ++c)
      partial[static_cast<std::size_t>(c)] = chunk(c * grain, std::min(count, (c + 1) * grain));
  });
  for (const auto& p : partial)
    for (std::size_t i = 0; i < N; ++i) total[i] += p[i];
  return total;
}

/// deterministic_sums with one value per chunk.
template <class Chunk>
double deterministic_sum(const ParallelFor& parallel, std::int64_t count, std::int64_t grain,
                         Chunk chunk) {
  return deterministic_sums<1>(parallel, count, grain, [&](std::int64_t begin, std::int64_t end) {
    return std::array<double, 1>{chunk(begin, end)};
  })[0];
}

}  // namespace polyhal
