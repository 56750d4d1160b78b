// Every kernel of a CPU device computes with the device's thread count,
// whichever thread prepares or runs it.
#pragma once

#include <memory>

#include "polyhal/kernel.hpp"

namespace polyhal::cpu {

/// `inner`, made to run (and bind its constants) with `threads` OpenMP
/// threads. omp_set_num_threads sets the count of the calling thread only:
/// a thread the device did not open on (a server's worker, a pipeline
/// stage's) would otherwise compute with every CPU of the machine (or
/// OMP_NUM_THREADS), not device.threads, and a kernel that sized per-thread
/// scratch when it was prepared would get more threads than it has scratch.
std::unique_ptr<Kernel> with_thread_count(std::unique_ptr<Kernel> inner, int threads);

/// Sets the calling thread's OpenMP thread count to `threads` (no call
/// where it already is).
void use_thread_count(int threads);

}  // namespace polyhal::cpu
