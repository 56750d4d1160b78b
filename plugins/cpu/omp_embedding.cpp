// The embedding sum on the CPU's one thread pool (OpenMP, which oneDNN uses):
// running it on oneTBB would wake a second pool whose spinning workers
// compete with OpenMP's for the same cores.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "onednn_matmul.hpp"
#include "polyhal/error.hpp"
#include "polyhal/reference_kernels.hpp"

namespace polyhal::cpu {
namespace {

class OmpEmbedding final : public Kernel {
 public:
  explicit OmpEmbedding(const KernelDesc& desc)
      : tokens_(desc.input_shapes.at(0).at(0)),
        seq_(desc.attrs_as<EmbeddingAttrs>().seq),
        positions_given_(desc.input_shapes.size() > 2) {}

  void set_constants(std::span<const Tensor> constants) override {
    // Given positions (packed rows) are checked per token instead.
    hidden_ = check_embedding_tables(constants, positions_given_ ? 0 : seq_);
    tables_.assign(constants.begin(), constants.end());
    // Two f32 rows of scratch per thread, allocated once.
    scratch_.assign(
        static_cast<std::size_t>(omp_get_max_threads()) * 2 * static_cast<std::size_t>(hidden_),
        0.0f);
  }

  void run(std::span<const Tensor> inputs, std::span<const Tensor> outputs) override {
    const auto* ids = static_cast<const std::int32_t*>(inputs[0].buffer->data());
    const auto* types = static_cast<const std::int32_t*>(inputs[1].buffer->data());
    check_embedding_ids(ids, types, tokens_, tables_);
    // Packed rows give each token's position; else position = index % seq.
    const auto* positions =
        inputs.size() > 2 ? static_cast<const std::int32_t*>(inputs[2].buffer->data()) : nullptr;
    if (positions) check_position_ids(positions, tokens_, tables_[1].shape[0]);
    const DType type = tables_[0].dtype;
    const auto h = static_cast<std::size_t>(hidden_);
    // No more threads than the scratch has rows for, whatever the calling
    // thread's OpenMP count is.
    const int threads = h == 0 ? 1 : std::max(1, static_cast<int>(scratch_.size() / (2 * h)));
#pragma omp parallel num_threads(threads)
    {
      float* sum = scratch_.data() + static_cast<std::size_t>(omp_get_thread_num()) * 2 * h;
      float* part = sum + h;
#pragma omp for schedule(static)
      for (std::int64_t t = 0; t < tokens_; ++t) {
        const std::int64_t rows[3] = {ids[t], positions ? positions[t] : t % seq_, types[t]};
        std::fill(sum, sum + h, 0.0f);
        for (int i = 0; i < 3; ++i) {
          const auto* row =
              static_cast<const char*>(tables_[static_cast<std::size_t>(i)].buffer->data()) +
              static_cast<std::size_t>(rows[i]) * h * dtype_size(type);
          convert(row, type, part, DType::f32, h);
          for (std::size_t c = 0; c < h; ++c) sum[c] += part[c];
        }
        convert(sum, DType::f32,
                static_cast<char*>(outputs[0].buffer->data()) +
                    static_cast<std::size_t>(t) * h * dtype_size(type),
                outputs[0].dtype, h);
      }
    }
  }

  std::string implementation() const override {
    return "openmp embedding";
  }

 private:
  std::int64_t tokens_, seq_, hidden_ = 0;
  bool positions_given_;
  std::vector<Tensor> tables_;
  std::vector<float> scratch_;
};

}  // namespace

std::unique_ptr<Kernel> make_omp_embedding(const KernelDesc& desc) {
  return std::make_unique<OmpEmbedding>(desc);
}

}  // namespace polyhal::cpu
