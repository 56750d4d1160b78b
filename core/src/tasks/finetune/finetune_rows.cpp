#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "polyhal/app/glue_data.hpp"
#include "tasks/finetune/finetune_data.hpp"
#include "util/format.hpp"

namespace polyhal {

void ModelRows::add(std::span<const std::int32_t> ids, std::span<const std::int32_t> types,
                    std::span<const std::int32_t> mask) {
  const auto width = static_cast<std::size_t>(seq);
  if (ids.size() != width || types.size() != width || mask.size() != width)
    throw std::invalid_argument(fmt::format("a row of {} tokens in rows of {}", ids.size(), seq));
  input_ids.insert(input_ids.end(), ids.begin(), ids.end());
  for (std::size_t t = 0; t < width; ++t) {
    token_type_ids.push_back(static_cast<std::uint8_t>(types[t] != 0));
    attention_mask.push_back(static_cast<std::uint8_t>(mask[t] != 0));
  }
}

TrainingBatch ModelRows::batch(std::span<const std::int64_t> rows) const {
  TrainingBatch batch;
  const auto width = static_cast<std::size_t>(seq);
  for (const std::int64_t row : rows) {
    if (row < 0 || row >= count())
      throw std::out_of_range(fmt::format("row {} of {}", row, count()));
    const auto r = static_cast<std::size_t>(row);
    const auto begin = static_cast<std::ptrdiff_t>(r * width);
    const auto end = begin + static_cast<std::ptrdiff_t>(width);
    batch.inputs.input_ids.insert(batch.inputs.input_ids.end(), input_ids.begin() + begin,
                                  input_ids.begin() + end);
    batch.inputs.token_type_ids.insert(batch.inputs.token_type_ids.end(),
                                       token_type_ids.begin() + begin,
                                       token_type_ids.begin() + end);
    batch.inputs.attention_mask.insert(batch.inputs.attention_mask.end(),
                                       attention_mask.begin() + begin,
                                       attention_mask.begin() + end);
    if (sequences_per_row > 0) {
      batch.inputs.position_ids.insert(batch.inputs.position_ids.end(),
                                       position_ids.begin() + begin, position_ids.begin() + end);
    }
    const auto slots = static_cast<std::size_t>(std::max<std::int64_t>(sequences_per_row, 1));
    for (std::size_t slot = r * slots; slot < (r + 1) * slots && !start_positions.empty(); ++slot) {
      batch.start_positions.push_back(start_positions[slot]);
      batch.end_positions.push_back(end_positions[slot]);
    }
    if (!labels.empty()) batch.labels.push_back(labels[r]);
    if (!targets.empty()) batch.targets.push_back(targets[r]);
  }
  return batch;
}

namespace {

/// The task's labels in the order of `model` (the start model's id2label)
/// when those are the same labels in another order or case; else the
/// task's own order. (A transformers MNLI model has entailment, neutral,
/// contradiction; GLUE's files contradiction, entailment, neutral.)
std::vector<std::string> labels_in_model_order(const std::vector<std::string>& task,
                                               const std::vector<std::string>& model) {
  if (model.size() != task.size()) return task;
  std::vector<std::string> ordered;
  for (const auto& name : model) {
    const auto it = std::find_if(task.begin(), task.end(), [&](const std::string& t) {
      return detail::ascii_lower(t) == detail::ascii_lower(name);
    });
    if (it == task.end()) return task;  // other names (LABEL_0, ...): the task's order
    ordered.push_back(*it);
  }
  std::vector<std::string> sorted = ordered;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return task;
  if (ordered != task)
    spdlog::info("labels in the start model's order (its id2label): {}", fmt::join(ordered, ", "));
  return ordered;
}

}  // namespace

TaskHead finetune_head(const RunConfig& config, const std::vector<std::string>& start_labels) {
  if (config.task == "squad") return {TaskHead::Kind::question_answering, 2, {}};
  const GlueTaskInfo& task = glue_task(config.section<FinetuneSection>().glue_task);
  if (task.labels.empty()) return {TaskHead::Kind::classification, 1, {}};
  return {TaskHead::Kind::classification, static_cast<std::int64_t>(task.labels.size()),
          labels_in_model_order(task.labels, start_labels)};
}

std::unique_ptr<FinetuneData> open_finetune_data(const RunConfig& config,
                                                 const TokenizerSpec& tokenizer, std::int64_t seq,
                                                 const TaskHead& head) {
  if (config.task == "squad") return open_squad_data(config, tokenizer, seq);
  return open_glue_data(config, tokenizer, seq, head);
}

}  // namespace polyhal
