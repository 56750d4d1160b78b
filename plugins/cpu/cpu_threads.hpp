// How many OpenMP threads a CPU device computes with.
#pragma once

#include <string>

namespace polyhal::cpu {

/// The thread count a CPU device uses, and why (shown by `polyhal devices`).
/// More OpenMP threads than this is a typo, not a machine.
constexpr int kMaxThreads = 4096;

struct ThreadChoice {
  int threads = 1;
  std::string reason;
};

/// `requested` (device.threads) when it is above 0. Otherwise
/// OMP_NUM_THREADS's first entry when it is 1 to kMaxThreads, as OpenMP
/// itself reads it, so `OMP_NUM_THREADS=4 polyhal run ...` works as it does
/// for PyTorch. Otherwise the CPUs this process may run on: its affinity
/// mask (taskset, a cgroup cpuset, or mpirun's binding of each rank), never
/// the machine's total: more threads than the cores a process may use buy
/// nothing, and the device's derived peak would count cores it cannot use.
/// (libgomp already stops spinning when its threads outnumber the mask, so
/// two ranks bound to one core each measured the same either way here; the
/// several-fold slowdown comes from unbound processes sharing cores, which
/// only an explicit count can prevent: docs/scale-out.md.)
ThreadChoice choose_threads(int requested, const char* omp_num_threads, int affinity_cpus);

/// The CPUs in this process's affinity mask (sched_getaffinity), or the
/// machine's count where the mask cannot be read.
int affinity_cpu_count();

}  // namespace polyhal::cpu
