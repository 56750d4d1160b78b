#include "omp_thread_count.hpp"

#include <omp.h>

#include <span>
#include <string>
#include <utility>

namespace polyhal::cpu {
namespace {

class ThreadCountKernel final : public Kernel {
 public:
  ThreadCountKernel(std::unique_ptr<Kernel> inner, int threads)
      : inner_(std::move(inner)), threads_(threads) {}

  void set_constants(std::span<const Tensor> constants) override {
    use_thread_count(threads_);
    inner_->set_constants(constants);
  }
  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    use_thread_count(threads_);
    inner_->run(inputs, outputs);
  }
  std::string implementation() const override { return inner_->implementation(); }
  std::uint64_t workspace_bytes() const override { return inner_->workspace_bytes(); }
  double flops() const override { return inner_->flops(); }

 private:
  std::unique_ptr<Kernel> inner_;
  int threads_;
};

}  // namespace

void use_thread_count(int threads) {
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

std::unique_ptr<Kernel> with_thread_count(std::unique_ptr<Kernel> inner, int threads) {
  return std::make_unique<ThreadCountKernel>(std::move(inner), threads);
}

}  // namespace polyhal::cpu
