#include "cpu_threads.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <thread>

namespace polyhal::cpu {

ThreadChoice choose_threads(int requested, const char* omp_num_threads, int affinity_cpus) {
  if (requested > 0) return {requested, "device.threads"};
  if (omp_num_threads != nullptr) {
    // OMP_NUM_THREADS is a list (one count per nesting level): the first.
    const std::string_view text(omp_num_threads);
    const std::string_view first = text.substr(0, text.find(','));
    int value = 0;
    const auto [end, error] = std::from_chars(first.data(), first.data() + first.size(), value);
    if (error == std::errc() && end == first.data() + first.size() && value > 0 &&
        value <= kMaxThreads)
      return {value, fmt::format("OMP_NUM_THREADS={}", omp_num_threads)};
  }
  const int cpus = std::max(1, affinity_cpus);
  std::string reason =
      fmt::format("the {} CPU{} this process may run on", cpus, cpus == 1 ? "" : "s");
  // A value that is set but unusable is said, not silently dropped.
  if (omp_num_threads != nullptr)
    reason += fmt::format(" (OMP_NUM_THREADS={} ignored: not 1 to {})",
                          std::string_view(omp_num_threads).substr(0, 32), kMaxThreads);
  return {cpus, reason};
}

int affinity_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace polyhal::cpu
