// embedding_backward on the CPU (train_kernels.hpp): the gradient of the
// word, position and token-type tables from the gradient of their sum.
// Only the rows the micro-batch used are touched, which is what makes it
// cheap: the reference kernel under mixed precision rounds and re-adds every
// element of the 30522 x H word-gradient table per micro-batch.
//
// Same numbers as the reference, bit for bit: each row's contribution is
// summed over its tokens in token order; in f32 the sum runs straight into
// the accumulated gradient, under bf16 it starts from zero, is rounded to
// bf16 and then added to the f32 accumulator (RoundedOutputs' rule for
// accumulated outputs).
#include <fmt/format.h>
#include <omp.h>

#include <array>
#include <bit>
#include <unordered_map>
#include <vector>

#include "onednn_matmul.hpp"
#include "polyhal/dtype.hpp"
#include "polyhal/error.hpp"
#include "polyhal/train_kernels.hpp"

namespace polyhal::cpu {
namespace {

/// Columns per work item: rows used by many tokens (token types, positions)
/// still spread over every thread.
constexpr std::int64_t kColumnBlock = 128;

/// The tokens of each used row of one table, rows in order of first use and
/// tokens in token order.
struct RowUse {
  std::vector<std::int64_t> rows;
  std::vector<std::vector<std::int64_t>> tokens;
};

class OmpEmbeddingBackward final : public Kernel {
 public:
  explicit OmpEmbeddingBackward(const KernelDesc& desc)
      : desc_(desc),
        types_(operand_types(desc)),
        tokens_(desc.input_shapes.at(0).at(0)),
        hidden_(desc.input_shapes.at(0).at(1)),
        seq_(desc.attrs_as<EmbeddingAttrs>().seq),
        rounded_(round_type(desc) == DType::bf16) {
    if (round_type(desc) == DType::f16)
      throw KernelNotFoundError("cpu embedding_backward: no f16 training; use bf16 or f32");
  }

  /// in: dY [tokens, H] (stored at round_to), ids, types (i32) -> out: +=
  /// dWord, dPosition, dType (f32).
  void run(std::span<const Tensor> in, std::span<const Tensor> out) override {
    check_operand_types(desc_, types_, in, out);
    const bool bf16 = in[0].dtype == DType::bf16;
    const float* dy32 = in[0].data<float>();
    const auto* dy16 = in[0].data<std::uint16_t>();
    const auto dy = [&](std::int64_t index) {
      return bf16 ? std::bit_cast<float>(static_cast<std::uint32_t>(dy16[index]) << 16)
                  : dy32[index];
    };
    const auto* ids = in[1].data<std::int32_t>();
    const auto* types = in[2].data<std::int32_t>();
    // Packed rows give each token's position; else position = row % seq.
    const auto* positions = in.size() > 3 ? in[3].data<std::int32_t>() : nullptr;
    std::array<RowUse, 3> use;
    std::array<std::unordered_map<std::int64_t, std::size_t>, 3> index;
    for (std::int64_t t = 0; t < tokens_; ++t) {
      const std::int64_t rows[3] = {ids[t], positions ? positions[t] : t % seq_, types[t]};
      for (std::size_t table = 0; table < 3; ++table) {
        const std::int64_t table_rows = out[table].numel() / hidden_;
        if (rows[table] < 0 || rows[table] >= table_rows) {
          throw RuntimeFailure(
              fmt::format("embedding_backward: token {} uses row {} of a table with {} rows", t,
                          rows[table], table_rows));
        }
        note(use[table], index[table], rows[table], t);
      }
    }
    struct Item {
      std::size_t table, row;
      std::int64_t first_column;
    };
    std::vector<Item> items;
    for (std::size_t table = 0; table < 3; ++table) {
      for (std::size_t r = 0; r < use[table].rows.size(); ++r)
        for (std::int64_t c = 0; c < hidden_; c += kColumnBlock) items.push_back({table, r, c});
    }
#pragma omp parallel for schedule(dynamic, 4)
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Item& item = items[i];
      const RowUse& u = use[item.table];
      float* grad = out[item.table].data<float>() + u.rows[item.row] * hidden_;
      const std::int64_t first = item.first_column,
                         last = std::min(hidden_, item.first_column + kColumnBlock);
      if (!rounded_) {
        for (std::int64_t t : u.tokens[item.row])
          for (std::int64_t c = first; c < last; ++c) grad[c] += dy(t * hidden_ + c);
        continue;
      }
      float sum[kColumnBlock] = {};
      for (std::int64_t t : u.tokens[item.row])
        for (std::int64_t c = first; c < last; ++c) sum[c - first] += dy(t * hidden_ + c);
      for (std::int64_t c = first; c < last; ++c)
        grad[c] += detail::round_bf16_inline(sum[c - first]);
    }
  }

  std::string implementation() const override {
    return rounded_ ? "openmp embedding_backward (used rows, bf16 contributions)"
                    : "openmp embedding_backward (used rows)";
  }

 private:
  /// Records that token `t` uses `row`; `index` maps the rows seen so far
  /// to their place in `use`, so the cost follows the tokens, not the table.
  static void note(RowUse& use, std::unordered_map<std::int64_t, std::size_t>& index,
                   std::int64_t row, std::int64_t t) {
    const auto [it, inserted] = index.emplace(row, use.rows.size());
    if (inserted) {
      use.rows.push_back(row);
      use.tokens.emplace_back();
    }
    use.tokens[it->second].push_back(t);
  }

  KernelDesc desc_;
  OperandTypes types_;
  std::int64_t tokens_, hidden_, seq_;
  bool rounded_;
};

}  // namespace

std::unique_ptr<Kernel> make_omp_embedding_backward(const KernelDesc& desc) {
  return std::make_unique<OmpEmbeddingBackward>(desc);
}

}  // namespace polyhal::cpu
