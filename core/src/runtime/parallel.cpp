#include "polyhal/parallel.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace polyhal {

ParallelFor tbb_parallel_for() {
  return [](std::int64_t count, const RangeBody& body) {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, count),
                      [&](const auto& r) { body(r.begin(), r.end()); });
  };
}

}  // namespace polyhal
