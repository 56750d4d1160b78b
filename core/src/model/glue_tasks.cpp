// The GLUE tasks: their label sets (a classification head's labels) and
// their TSV columns, as BERT's run_classifier.py and Hugging Face's glue.py.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "polyhal/app/glue_tasks.hpp"
#include "polyhal/error.hpp"
#include "util/format.hpp"

namespace polyhal {
namespace {

const std::vector<GlueTaskInfo>& tasks() {
  // Columns as BERT's run_classifier.py / Hugging Face's glue.py read them.
  static const std::vector<GlueTaskInfo> all{
      {"cola", {"0", "1"}, false, {"matthews"}, false, 3, -1, 1},
      {"sst-2", {"0", "1"}, false, {"accuracy"}, true, 0, -1, 1},
      {"mrpc", {"0", "1"}, true, {"accuracy", "f1"}, true, 3, 4, 0},
      {"sts-b", {}, true, {"pearson", "spearman"}, true, 7, 8, -1},
      {"qqp", {"0", "1"}, true, {"accuracy", "f1"}, true, 3, 4, 5},
      {"mnli", {"contradiction", "entailment", "neutral"}, true, {"accuracy"}, true, 8, 9, -1},
      {"mnli-mm", {"contradiction", "entailment", "neutral"}, true, {"accuracy"}, true, 8, 9, -1},
      {"qnli", {"entailment", "not_entailment"}, true, {"accuracy"}, true, 1, 2, -1},
      {"rte", {"entailment", "not_entailment"}, true, {"accuracy"}, true, 1, 2, -1},
      {"wnli", {"0", "1"}, true, {"accuracy"}, true, 1, 2, -1},
      // GLUE's diagnostic set: a test file (index, sentence1, sentence2)
      // predicted with an MNLI model, in MNLI's labels; nothing to train on.
      {"ax", {"contradiction", "entailment", "neutral"}, true, {"accuracy"}, true, 1, 2, -1},
  };
  return all;
}

}  // namespace

const GlueTaskInfo& glue_task(const std::string& name) {
  std::string key = detail::ascii_lower(name);
  if (key == "sst2") key = "sst-2";
  if (key == "stsb") key = "sts-b";
  if (key == "mnli_mismatched" || key == "mnli-mismatched") key = "mnli-mm";
  if (key == "mnli_matched" || key == "mnli-matched") key = "mnli";
  std::vector<std::string> names;
  for (const auto& task : tasks()) {
    if (task.name == key) return task;
    names.push_back(task.name);
  }
  throw ConfigError(
      fmt::format("unknown GLUE task '{}' (tasks: {})", name, fmt::join(names, ", ")));
}

}  // namespace polyhal
