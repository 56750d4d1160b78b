#include "polyhal/parallel.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

namespace polyhal {

ParallelFor tbb_parallel_for() {
  return [](std::int64_t count, const RangeBody& body) {
    tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, count),
                      [&](const auto& r) { body(r.begin(), r.end()); });
  };
}

double deterministic_sum(const ParallelFor& parallel, std::int64_t count, std::int64_t grain,
                         const std::function<double(std::int64_t, std::int64_t)>& chunk) {
  if (count <= 0) return 0.0;
  const std::int64_t chunks = (count + grain - 1) / grain;
  std::vector<double> partial(static_cast<std::size_t>(chunks));
  parallel(chunks, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t c = first; c < last; ++c)
      partial[static_cast<std::size_t>(c)] = chunk(c * grain, std::min(count, (c + 1) * grain));
  });
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}

}  // namespace polyhal
