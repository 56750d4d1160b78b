// A packed batch trains exactly as the same sequences unpacked: the same
// MLM and NSP losses and the same gradient of every parameter (f32, within
// 1e-5), on the CPU kernels and on the reference kernels of the device models.
#include <gtest/gtest.h>

#include <cmath>

#include "polyhal/bert_training.hpp"
#include "polyhal/bert_weights.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

constexpr std::int64_t kSeq = 16;

/// One sequence: tokens, segment ids, masked (position, id) pairs, NSP label.
struct Sequence {
  std::vector<std::int32_t> ids, types;
  std::vector<std::pair<std::int32_t, std::int32_t>> masked;
  std::int32_t next = 0;
};

std::vector<Sequence> sequences() {
  const std::vector<std::int64_t> lengths{7, 5, 9, 6};
  std::vector<Sequence> out;
  for (std::size_t n = 0; n < lengths.size(); ++n) {
    Sequence s;
    for (std::int64_t t = 0; t < lengths[n]; ++t) {
      s.ids.push_back(t == 0 ? 2 : static_cast<std::int32_t>(5 + (7 * n + 3 * t) % 50));
      s.types.push_back(t < lengths[n] / 2 ? 0 : 1);
    }
    s.masked = {{1, static_cast<std::int32_t>(10 + n)}, {3, static_cast<std::int32_t>(20 + n)}};
    s.next = static_cast<std::int32_t>(n % 2);
    out.push_back(s);
  }
  return out;
}

/// Rows of kSeq tokens, each holding the sequences `rows[r]`, at most `k` per row.
TrainingBatch batch_of(const std::vector<Sequence>& all, const std::vector<std::vector<int>>& rows,
                       std::int64_t k, bool packed) {
  TrainingBatch b;
  const auto tokens = static_cast<std::size_t>(rows.size()) * kSeq;
  b.inputs.input_ids.assign(tokens, 0);
  b.inputs.token_type_ids.assign(tokens, 0);
  b.inputs.attention_mask.assign(tokens, 0);
  if (packed) b.inputs.position_ids.assign(tokens, 0);
  b.mlm_labels.assign(tokens, -100);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::int32_t offset = 0;
    for (std::size_t q = 0; q < rows[r].size(); ++q) {
      const Sequence& s = all[static_cast<std::size_t>(rows[r][q])];
      const auto base = static_cast<std::int32_t>(r * kSeq) + offset;
      for (std::size_t t = 0; t < s.ids.size(); ++t) {
        const auto at = static_cast<std::size_t>(base) + t;
        b.inputs.input_ids[at] = s.ids[t];
        b.inputs.token_type_ids[at] = s.types[t];
        b.inputs.attention_mask[at] = static_cast<std::int32_t>(q + 1);
        if (packed) b.inputs.position_ids[at] = static_cast<std::int32_t>(t);
      }
      for (const auto& [position, id] : s.masked)
        b.mlm_labels[static_cast<std::size_t>(base + position)] = id;
      if (packed) {
        b.nsp_positions.push_back(base);
        b.nsp_labels.push_back(s.next);
      } else {
        b.nsp_labels.push_back(s.next);
      }
      offset += static_cast<std::int32_t>(s.ids.size());
    }
    for (auto q = static_cast<std::int64_t>(rows[r].size()); packed && q < k; ++q) {
      b.nsp_positions.push_back(static_cast<std::int32_t>(r * kSeq));  // an empty slot
      b.nsp_labels.push_back(-100);
    }
  }
  return b;
}

TEST(PackedTraining, APackedBatchTrainsAsTheSameSequencesUnpacked) {
  const BertConfig config = test::small_bert(2);
  const auto weights = init_bert_weights(config, 11);
  const auto all = sequences();
  OptimizerSettings adamw;
  adamw.kind = "adamw";
  for (const char* backend : {"cpu", "gaudi"}) {
    auto device = test::first_device(backend);
    // Unpacked: one sequence per row, 2 masked positions each.
    BertTraining unpacked(*device, config, {4, kSeq}, adamw, DType::f32, {}, 3, 2);
    unpacked.load_weights(weights);
    const StepLosses a = unpacked.forward_backward(batch_of(all, {{0}, {1}, {2}, {3}}, 1, false));
    // Packed: two rows, two sequences each (up to 3), 4 masked positions per row.
    BertTraining packed(*device, config, {2, kSeq}, adamw, DType::f32, {}, 3, 6, TaskHead{}, {},
                        PipelineStage{}, 3);
    packed.load_weights(weights);
    const StepLosses p = packed.forward_backward(batch_of(all, {{0, 1}, {2, 3}}, 3, true));
    EXPECT_NEAR(p.mlm, a.mlm, 1e-5) << backend;
    EXPECT_NEAR(p.nsp, a.nsp, 1e-5) << backend;
    EXPECT_GT(a.mlm, 0.0);
    const TensorMap ga = unpacked.gradients(), gp = packed.gradients();
    ASSERT_EQ(ga.size(), gp.size());
    double largest = 0;
    for (const auto& [name, tensor] : ga) {
      const auto& other = gp.at(name).values;
      for (std::size_t i = 0; i < tensor.values.size(); ++i) {
        ASSERT_NEAR(other[i], tensor.values[i], 1e-5) << backend << " " << name << " " << i;
        largest = std::max(largest, static_cast<double>(std::abs(tensor.values[i])));
      }
    }
    EXPECT_GT(largest, 1e-3) << "the gradients are not all zero";
  }
}

}  // namespace
}  // namespace polyhal
