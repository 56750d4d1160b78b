// A packed batch trains exactly as the same sequences unpacked: the same
// MLM and NSP losses (or SQuAD span loss) and the same gradient of every
// parameter (f32, within 1e-5), on the CPU kernels and on the reference
// kernels of the device models; packed inference gives each sequence the
// logits it has alone.
#include <gtest/gtest.h>

#include <cmath>

#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/error.hpp"
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

/// Every gradient of `b` within 1e-5 of `a`'s, and not all zero.
void expect_same_gradients(const TensorMap& a, const TensorMap& b, const char* backend) {
  ASSERT_EQ(a.size(), b.size());
  double largest = 0;
  for (const auto& [name, tensor] : a) {
    const auto& other = b.at(name).values;
    for (std::size_t i = 0; i < tensor.values.size(); ++i) {
      ASSERT_NEAR(other[i], tensor.values[i], 1e-5) << backend << " " << name << " " << i;
      largest = std::max(largest, static_cast<double>(std::abs(tensor.values[i])));
    }
  }
  EXPECT_GT(largest, 1e-3) << "the gradients are not all zero";
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
    BertTraining unpacked(*device, config, {4, kSeq},
                          {.optimizer = adamw, .seed = 3, .max_predictions = 2});
    unpacked.load_weights(weights);
    const StepLosses a = unpacked.forward_backward(batch_of(all, {{0}, {1}, {2}, {3}}, 1, false));
    // Packed: two rows, two sequences each (up to 3), 4 masked positions per row.
    BertTraining packed(
        *device, config, {2, kSeq},
        {.optimizer = adamw, .seed = 3, .max_predictions = 6, .packed_sequences = 3});
    packed.load_weights(weights);
    const StepLosses p = packed.forward_backward(batch_of(all, {{0, 1}, {2, 3}}, 3, true));
    EXPECT_NEAR(p.mlm, a.mlm, 1e-5) << backend;
    EXPECT_NEAR(p.nsp, a.nsp, 1e-5) << backend;
    EXPECT_GT(a.mlm, 0.0);
    expect_same_gradients(unpacked.gradients(), packed.gradients(), backend);
  }
}

/// SQuAD rows: the sequences `rows[r]` packed into row r (one per row
/// unpacked), each answer span (start, end) moved to its row position;
/// position ids restart per sequence, and empty slots hold -100.
TrainingBatch span_batch_of(const std::vector<Sequence>& all,
                            const std::vector<std::vector<int>>& rows, std::int64_t k) {
  TrainingBatch b = batch_of(all, rows, k, true);
  b.mlm_labels.clear();
  b.nsp_labels.clear();
  b.nsp_positions.clear();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::int32_t offset = 0;  // positions index the row
    for (const int index : rows[r]) {
      const Sequence& s = all[static_cast<std::size_t>(index)];
      // The answer: two tokens of the second segment (or [CLS]: no answer).
      const bool answered = index != 2;
      const auto last = static_cast<std::int32_t>(s.ids.size()) - 1;
      b.start_positions.push_back(offset + (answered ? last - 2 : 0));
      b.end_positions.push_back(offset + (answered ? last - 1 : 0));
      offset += static_cast<std::int32_t>(s.ids.size());
    }
    for (auto q = static_cast<std::int64_t>(rows[r].size()); q < k; ++q) {
      b.start_positions.push_back(-100);
      b.end_positions.push_back(-100);
    }
  }
  return b;
}

TEST(PackedTraining, PackedSquadRowsTrainAsTheSameSequencesUnpacked) {
  const BertConfig config = test::small_bert(2);
  const TaskHead qa{TaskHead::Kind::question_answering, 2, {}};
  const auto weights = init_bert_weights(config, 11, qa);
  const auto all = sequences();
  OptimizerSettings adamw;
  adamw.kind = "adamw";
  for (const char* backend : {"cpu", "gaudi"}) {
    auto device = test::first_device(backend);
    // One sequence per row: each softmax over the sequence's own tokens.
    BertTraining unpacked(*device, config, {4, kSeq},
                          {.optimizer = adamw, .seed = 3, .head = qa, .packed_sequences = 1});
    unpacked.load_weights(weights);
    const StepLosses a = unpacked.forward_backward(span_batch_of(all, {{0}, {1}, {2}, {3}}, 1));
    // Two sequences in each row (up to 3: an empty slot each).
    BertTraining packed(*device, config, {2, kSeq},
                        {.optimizer = adamw, .seed = 3, .head = qa, .packed_sequences = 3});
    packed.load_weights(weights);
    const StepLosses p = packed.forward_backward(span_batch_of(all, {{0, 1}, {2, 3}}, 3));
    EXPECT_GT(a.task, 0.5);
    EXPECT_NEAR(p.task, a.task, 1e-5) << backend;
    expect_same_gradients(unpacked.gradients(), packed.gradients(), backend);
  }
}

TEST(PackedTraining, ASpanOverAWholeRowIsHuggingFacesLoss) {
  // With no padding, the softmax over the sequence's tokens is the one over
  // the row: the packed loss of one full sequence per row is the reference's.
  const BertConfig config = test::small_bert(1);
  const TaskHead qa{TaskHead::Kind::question_answering, 2, {}};
  const auto weights = init_bert_weights(config, 5, qa);
  Sequence full;
  for (std::int64_t t = 0; t < kSeq; ++t) {
    full.ids.push_back(static_cast<std::int32_t>(5 + (3 * t) % 40));
    full.types.push_back(t < 6 ? 0 : 1);
  }
  const std::vector<Sequence> all{full, full, full, full};
  auto device = test::first_device("cpu");
  BertTraining plain(*device, config, {2, kSeq}, {.seed = 1, .head = qa});
  BertTraining masked(*device, config, {2, kSeq}, {.seed = 1, .head = qa, .packed_sequences = 1});
  plain.load_weights(weights);
  masked.load_weights(weights);
  const TrainingBatch packed = span_batch_of(all, {{0}, {1}}, 1);
  TrainingBatch reference = packed;
  reference.inputs.position_ids.clear();
  const StepLosses a = plain.forward_backward(reference);
  const StepLosses b = masked.forward_backward(packed);
  EXPECT_GT(a.task, 0.5);
  EXPECT_NEAR(b.task, a.task, 1e-6);
  expect_same_gradients(plain.gradients(), masked.gradients(), "cpu");
}

TEST(PackedTraining, PackedInferenceGivesEachSequenceItsOwnLogits) {
  const BertConfig config = test::small_bert(2);
  const TaskHead qa{TaskHead::Kind::question_answering, 2, {}};
  const auto weights = init_bert_weights(config, 13, qa);
  const auto all = sequences();
  for (const char* backend : {"cpu", "ipu"}) {
    auto device = test::first_device(backend);
    BertInference unpacked(*device, config, {4, kSeq}, DType::f32, qa);
    BertInference packed(*device, config, {2, kSeq}, DType::f32, qa, true);
    unpacked.load_weights(weights);
    packed.load_weights(weights);
    TrainingBatch alone = batch_of(all, {{0}, {1}, {2}, {3}}, 1, false);
    BertOutputs a, p;
    unpacked.run(alone.inputs, &a);
    packed.run(batch_of(all, {{0, 1}, {2, 3}}, 3, true).inputs, &p);
    const std::vector<std::pair<int, std::int64_t>> places{{0, 0}, {0, 7}, {1, 0}, {1, 9}};
    for (std::size_t q = 0; q < all.size(); ++q) {
      const auto [row, offset] = places[q];
      for (std::size_t t = 0; t < all[q].ids.size(); ++t) {
        const auto alone_at = q * kSeq + t;
        const auto packed_at = static_cast<std::size_t>(row * kSeq + offset) + t;
        ASSERT_NEAR(p.start_logits[packed_at], a.start_logits[alone_at], 1e-5) << backend << q;
        ASSERT_NEAR(p.end_logits[packed_at], a.end_logits[alone_at], 1e-5) << backend << q;
      }
    }
    // Packed rows need position ids; an unpacked model refuses them.
    EXPECT_THROW(packed.run(alone.inputs, nullptr), RuntimeFailure);
    EXPECT_THROW(unpacked.run(batch_of(all, {{0}, {1}, {2}, {3}}, 1, true).inputs, nullptr),
                 RuntimeFailure);
  }
}

}  // namespace
}  // namespace polyhal
