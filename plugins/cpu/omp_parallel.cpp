// The CPU plugin's ParallelFor: the OpenMP pool oneDNN runs on, so training
// kernels between two GEMMs find its threads already awake instead of waking
// a second pool (oneTBB) that would compete for the same cores.
#include <omp.h>

#include "onednn_matmul.hpp"

namespace polyhal::cpu {

ParallelFor omp_parallel_for() {
  return [](std::int64_t count, const RangeBody& body) {
    if (count <= 0) return;
    if (count == 1 || omp_in_parallel()) {
      body(0, count);
      return;
    }
    // Static split into one contiguous range per thread: the ops here are
    // uniform per element, and a fixed split keeps caches warm across ops.
#pragma omp parallel
    {
      const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const std::int64_t begin = count * t / threads, end = count * (t + 1) / threads;
      if (begin < end) body(begin, end);
    }
  };
}

}  // namespace polyhal::cpu
