#pragma once
/// @file parallel.hpp
/// The thread pool a kernel library runs on, as a value. The reference
/// training kernels are written once against ParallelFor; the default runs
/// them on oneTBB, the CPU plugin on the OpenMP pool oneDNN already keeps
/// warm (two spinning pools on the same cores slow each other down).
#include <cstdint>
#include <functional>

namespace polyhal {

/// body(begin, end) over disjoint ranges that cover [0, count).
using RangeBody = std::function<void(std::int64_t begin, std::int64_t end)>;

/// Calls `body` over ranges covering [0, count), possibly concurrently, and
/// returns when every range is done. How [0, count) is split is the pool's
/// choice: a body must give the same result for any split.
using ParallelFor = std::function<void(std::int64_t count, const RangeBody& body)>;

/// oneTBB's parallel_for with its automatic partitioner.
ParallelFor tbb_parallel_for();

/// Sum of chunk(begin, end) over fixed chunks of `grain` elements, added in
/// chunk order: the result does not depend on the thread count or the split,
/// so a resumed run repeats an uninterrupted one bit for bit.
double deterministic_sum(const ParallelFor& parallel, std::int64_t count, std::int64_t grain,
                         const std::function<double(std::int64_t begin, std::int64_t end)>& chunk);

}  // namespace polyhal
