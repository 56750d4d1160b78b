#include "tasks/pretrain/pretrain_evaluation.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "polyhal/app/tensor_limit.hpp"
#include "polyhal/error.hpp"
#include "tasks/pretrain/pretrain_section.hpp"
#include "train/trainer.hpp"

namespace polyhal {
namespace {

/// Rows waiting for an evaluation batch: one sequence each, unpacked.
struct PendingRows {
  BertInputs inputs;
  std::vector<std::int32_t> mlm_labels, nsp_labels;
  std::int64_t count = 0;
};

/// Appends the first `rows` rows of `batch` as rows of `seq` tokens. A
/// packed row gives one row per sequence, its tokens moved to their
/// positions: attention never crosses sequences in a packed row, so this is
/// the same computation, and the heads then read every sequence's [CLS].
void append_rows(const TrainingBatch& batch, std::int64_t rows, std::int64_t seq,
                 PendingRows& out) {
  const auto s = static_cast<std::size_t>(seq);
  const auto append_slice = [](std::vector<std::int32_t>& to, const std::vector<std::int32_t>& from,
                               std::size_t first, std::size_t count) {
    to.insert(to.end(), from.begin() + static_cast<std::ptrdiff_t>(first),
              from.begin() + static_cast<std::ptrdiff_t>(first + count));
  };
  if (batch.nsp_positions.empty()) {
    const auto tokens = static_cast<std::size_t>(rows) * s;
    append_slice(out.inputs.input_ids, batch.inputs.input_ids, 0, tokens);
    append_slice(out.inputs.token_type_ids, batch.inputs.token_type_ids, 0, tokens);
    append_slice(out.inputs.attention_mask, batch.inputs.attention_mask, 0, tokens);
    append_slice(out.mlm_labels, batch.mlm_labels, 0, tokens);
    append_slice(out.nsp_labels, batch.nsp_labels, 0, static_cast<std::size_t>(rows));
    out.count += rows;
    return;
  }
  const std::size_t micro = batch.inputs.input_ids.size() / s;
  const std::size_t slots = batch.nsp_positions.size() / micro;
  for (std::size_t b = 0; b < static_cast<std::size_t>(rows); ++b) {
    for (std::size_t q = 0; q < slots; ++q) {
      const std::int32_t label = batch.nsp_labels[b * slots + q];
      if (label == -100) continue;  // an empty slot
      const auto cls = static_cast<std::size_t>(batch.nsp_positions[b * slots + q]);
      const std::int32_t sequence = batch.inputs.attention_mask[cls];
      const std::size_t first = out.inputs.input_ids.size();
      out.inputs.input_ids.resize(first + s, 0);
      out.inputs.token_type_ids.resize(first + s, 0);
      out.inputs.attention_mask.resize(first + s, 0);
      out.mlm_labels.resize(first + s, -100);
      for (std::size_t t = b * s; t < (b + 1) * s; ++t) {
        if (batch.inputs.attention_mask[t] != sequence) continue;
        const auto p = static_cast<std::size_t>(batch.inputs.position_ids[t]);
        if (p >= s) continue;  // the data's reader bounds positions by the row
        out.inputs.input_ids[first + p] = batch.inputs.input_ids[t];
        out.inputs.token_type_ids[first + p] = batch.inputs.token_type_ids[t];
        out.inputs.attention_mask[first + p] = 1;
        out.mlm_labels[first + p] = batch.mlm_labels[t];
      }
      out.nsp_labels.push_back(label);
      ++out.count;
    }
  }
}

/// Sums over the sequences scored: MLPerf's counts and the losses.
struct Scores {
  double mlm_correct = 0, mlm_count = 0, mlm_loss = 0;
  double nsp_correct = 0, nsp_count = 0, nsp_loss = 0;
};

/// Cross-entropy of `label` and whether the first largest logit is it (as
/// argmax in TensorFlow and PyTorch).
std::pair<double, bool> score_logits(const float* logits, std::size_t count, std::int32_t label) {
  const float* top = std::max_element(logits, logits + count);
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) sum += std::exp(static_cast<double>(logits[i] - *top));
  const double loss = std::log(sum) + static_cast<double>(*top - logits[label]);
  return {loss, top - logits == label};
}

/// The token indices (row x seq + position) of each row's labelled
/// positions, `predictions` per row (padded with the row's [CLS], label
/// -100), and their labels in the same order.
std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> gathered_labels(
    const std::vector<std::int32_t>& labels, std::int64_t rows, std::int64_t seq,
    std::int64_t predictions) {
  std::vector<std::int32_t> positions, gathered;
  for (std::int64_t j = 0; j < rows; ++j) {
    std::int64_t taken = 0;
    for (std::int64_t t = 0; t < seq && taken < predictions; ++t) {
      const std::int32_t label = labels[static_cast<std::size_t>(j * seq + t)];
      if (label < 0) continue;
      positions.push_back(static_cast<std::int32_t>(j * seq + t));
      gathered.push_back(label);
      ++taken;
    }
    for (; taken < predictions; ++taken) {
      positions.push_back(static_cast<std::int32_t>(j * seq));
      gathered.push_back(-100);
    }
  }
  return {positions, gathered};
}

/// Scores the first `real` rows: `mlm_labels` [rows x P] for the gathered
/// MLM logits [rows x P, vocab], `nsp_labels` per row.
void score(const BertOutputs& out, const std::vector<std::int32_t>& mlm_labels,
           const std::vector<std::int32_t>& nsp_labels, std::int64_t real, std::int64_t predictions,
           std::int64_t vocab, Scores& scores) {
  const auto v = static_cast<std::size_t>(vocab);
  for (std::int64_t i = 0; i < real * predictions; ++i) {
    const std::int32_t label = mlm_labels[static_cast<std::size_t>(i)];
    if (label < 0) continue;
    const auto [loss, right] =
        score_logits(out.mlm_logits.data() + static_cast<std::size_t>(i) * v, v, label);
    scores.mlm_loss += loss;
    scores.mlm_correct += right ? 1 : 0;
    scores.mlm_count += 1;
  }
  for (std::int64_t j = 0; j < real; ++j) {
    const std::int32_t next = nsp_labels[static_cast<std::size_t>(j)];
    if (next < 0) continue;
    const auto [loss, right] =
        score_logits(out.nsp_logits.data() + static_cast<std::size_t>(j) * 2, 2, next);
    scores.nsp_loss += loss;
    scores.nsp_correct += right ? 1 : 0;
    scores.nsp_count += 1;
  }
}

/// Takes the first `count` rows of `rows` (of `seq` tokens) out, padded to
/// `batch` rows by repeating the last one.
PendingRows take_rows(PendingRows& rows, std::int64_t count, std::int64_t batch, std::int64_t seq) {
  PendingRows out;
  const auto s = static_cast<std::size_t>(seq);
  const auto move_front = [&](std::vector<std::int32_t>& from, std::vector<std::int32_t>& to,
                              std::size_t width) {
    const auto n = static_cast<std::size_t>(count) * width;
    to.assign(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
    from.erase(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
    for (std::int64_t j = count; j < batch; ++j)
      to.insert(to.end(), to.end() - static_cast<std::ptrdiff_t>(width), to.end());
  };
  move_front(rows.inputs.input_ids, out.inputs.input_ids, s);
  move_front(rows.inputs.token_type_ids, out.inputs.token_type_ids, s);
  move_front(rows.inputs.attention_mask, out.inputs.attention_mask, s);
  move_front(rows.mlm_labels, out.mlm_labels, s);
  move_front(rows.nsp_labels, out.nsp_labels, 1);
  rows.count -= count;
  out.count = count;
  return out;
}

}  // namespace

PretrainEvaluator::PretrainEvaluator(Device& device, const RunConfig& config,
                                     const BertConfig& model, DType precision, std::int64_t seq_len)
    : config_(config), model_(model), precision_(precision) {
  const auto& e = config.section<EvalSection>();
  shape_ = {e.micro > 0 ? e.micro : config.batch.micro, seq_len};
  plan_model(device, config.data.max_predictions);
  DataSource held_out = data_source(config);
  held_out.data.section = "eval";
  held_out.data.source = e.source;
  held_out.data.files = e.files;
  held_out.data.seed = e.seed.value_or(config.data.seed + 1);
  held_out.data.shuffle = false;
  held_out.data.packed = TriState::automatic;
  data_ = open_pretraining_data(held_out, model_, shape_);
  const std::int64_t available = data_->rows();
  rows_ = e.samples > 0 ? e.samples : (available > 0 ? available : 256);
  if (available > 0 && rows_ > available) {
    spdlog::warn("eval.samples is {}, but {} holds {} rows: evaluating those", rows_,
                 e.files.string(), available);
    rows_ = available;
  }
  // Every row of files is read once here: ids of another vocabulary or
  // labels out of range fail now (in validate too), not at the first
  // evaluation. Generated rows are in range by making.
  if (e.files.empty()) return;
  try {
    for (std::int64_t b = 0; b * shape_.batch < rows_; ++b)
      (void)data_->batch(static_cast<std::uint64_t>(b));
  } catch (const ConfigError& err) {
    const char* key = e.files.empty() ? "eval.source" : "eval.files";
    throw config.error(key, err.what());
  }
}

PretrainEvaluator::~PretrainEvaluator() = default;

void PretrainEvaluator::plan_model(Device& device, std::int64_t predictions) {
  const auto& e = config_.section<EvalSection>();
  const char* key = e.micro > 0 ? "eval.micro" : "batch.micro";
  try {
    const BertInference declared(device, model_, shape_, InferencePrecision(precision_), TaskHead{},
                                 false, predictions);
    for (MemoryItem item : declared.plan_memory().items) {
      item.name = "evaluation: " + item.name;
      memory_items_.push_back(std::move(item));
    }
  } catch (const TensorTooLargeError& error) {
    throw config_.error(key, fmt::format("evaluation batches of {} sequences of {} tokens: {}; "
                                         "lower {}",
                                         shape_.batch, shape_.seq, error.what(), key));
  }
}

std::string PretrainEvaluator::description() const {
  const auto& e = config_.section<EvalSection>();
  const std::string when =
      e.every_steps > 0     ? fmt::format("every {} steps and at the end", e.every_steps)
      : e.every_samples > 0 ? fmt::format("every {} samples and at the end", e.every_samples)
                            : std::string("at the end");
  return fmt::format("{} rows of {}, {} rows per batch, {}{}", rows_, data_->description(),
                     shape_.batch, when,
                     e.stop_at > 0 ? fmt::format(", stopping at masked-LM accuracy {}", e.stop_at)
                                   : std::string());
}

bool PretrainEvaluator::due(std::int64_t step, std::int64_t global_batch, bool last) const {
  const auto& e = config_.section<EvalSection>();
  if (last) return true;
  if (e.every_steps > 0) return step % e.every_steps == 0;
  return passes_multiple(step, global_batch, e.every_samples);
}

PretrainEvaluation PretrainEvaluator::evaluate(Device& device, const TensorMap& weights,
                                               Communicator& replicas, std::int64_t step,
                                               std::unique_ptr<BertInference>& model) const {
  const auto begin = std::chrono::steady_clock::now();
  const std::int64_t predictions = data_->max_predictions();
  if (!model) {
    model = std::make_unique<BertInference>(device, model_, shape_, InferencePrecision(precision_),
                                            TaskHead{}, false, predictions);
  }
  model->load_weights(weights);
  const std::int64_t micro = shape_.batch, seq = shape_.seq;
  const std::int64_t batches = (rows_ + micro - 1) / micro;
  Scores scores;
  PendingRows pending;
  BertOutputs outputs;
  const auto run_batch = [&](std::int64_t count) {
    PendingRows rows = take_rows(pending, count, micro, seq);
    auto [positions, labels] = gathered_labels(rows.mlm_labels, micro, seq, predictions);
    rows.inputs.mlm_positions = std::move(positions);
    model->run(rows.inputs, &outputs);
    score(outputs, labels, rows.nsp_labels, count, predictions, model_.vocab_size, scores);
  };
  for (std::int64_t b = replicas.rank(); b < batches; b += replicas.size()) {
    const std::int64_t real = std::min(micro, rows_ - b * micro);
    append_rows(data_->batch(static_cast<std::uint64_t>(b)), real, seq, pending);
    while (pending.count >= micro) run_batch(micro);
  }
  if (pending.count > 0) run_batch(pending.count);
  std::array<float, 6> sums{
      static_cast<float>(scores.mlm_correct), static_cast<float>(scores.mlm_count),
      static_cast<float>(scores.mlm_loss),    static_cast<float>(scores.nsp_correct),
      static_cast<float>(scores.nsp_count),   static_cast<float>(scores.nsp_loss)};
  replicas.set_purpose("the evaluation's sums");
  if (replicas.size() > 1) replicas.all_reduce(sums.data(), sums.size(), DType::f32, ReduceOp::sum);
  PretrainEvaluation result;
  result.step = step;
  result.masked_tokens = static_cast<std::int64_t>(sums[1]);
  result.sequences = static_cast<std::int64_t>(sums[4]);
  const auto ratio = [](float a, float b) { return b > 0 ? static_cast<double>(a) / b : 0.0; };
  result.mlm_accuracy = ratio(sums[0], sums[1]);
  result.mlm_loss = ratio(sums[2], sums[1]);
  result.nsp_accuracy = ratio(sums[3], sums[4]);
  result.nsp_loss = ratio(sums[5], sums[4]);
  const double target = config_.section<EvalSection>().stop_at;
  result.reached_target = target > 0 && result.mlm_accuracy >= target;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

}  // namespace polyhal
