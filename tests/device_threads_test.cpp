// device.threads holds in every thread that runs a CPU device's kernels, not
// only in the one that opened it: omp_set_num_threads sets the calling
// thread's count alone, and a server's worker thread used to compute with
// every CPU (and overrun scratch sized for device.threads).
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "cpu_threads.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::ptrdiff_t process_threads() {
  return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                       std::filesystem::directory_iterator{});
}

/// The process's threads that appear while a fresh thread prepares and runs
/// an f32 matmul of 256^3 and an embedding on a CPU device of `threads`
/// threads: the OpenMP pool that thread starts (threads - 1 of them).
std::ptrdiff_t threads_a_worker_starts(const std::string& threads) {
  auto device = test::first_device("cpu", {{"threads", threads}});
  auto matmul = device->prepare_kernel(
      {OpKind::matmul, DType::f32, {{256, 256}, {256, 256}}, MatmulAttrs{DType::f32}});
  Tensor a = device->allocate_tensor(DType::f32, {256, 256}, "A");
  Tensor b = device->allocate_tensor(DType::f32, {256, 256}, "B");
  Tensor c = device->allocate_tensor(DType::f32, {256, 256}, "C");
  std::ptrdiff_t started = -1;
  std::thread worker([&] {
    const auto before = process_threads();
    const std::array inputs{a, b};
    const std::array outputs{c};
    matmul->run(inputs, outputs);
    started = process_threads() - before;
  });
  worker.join();
  return started;
}

TEST(DeviceThreads, AWorkerThreadComputesWithTheDeviceThreadCount) {
  if (cpu::affinity_cpu_count() < 2) GTEST_SKIP() << "one CPU: every count is 1";
  EXPECT_EQ(threads_a_worker_starts("1"), 0)
      << "a worker thread computed with more threads than device.threads 1";
  // The control (second: a finished worker's pool leaves asynchronously):
  // two threads do start a pool of one, so the count above is seen, not
  // assumed.
  EXPECT_GE(threads_a_worker_starts("2"), 1);
}

}  // namespace
}  // namespace polyhal
