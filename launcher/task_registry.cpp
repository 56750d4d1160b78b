// The launcher's task registry: one line per task.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "polyhal/error.hpp"
#include "task.hpp"

namespace polyhal::launcher {

std::unique_ptr<Task> make_matmul_bench_task();
std::unique_ptr<Task> make_inference_task();
std::unique_ptr<Task> make_pretrain_task();
std::unique_ptr<Task> make_squad_task();
std::unique_ptr<Task> make_glue_task();

const std::vector<std::unique_ptr<Task>>& registered_tasks() {
  static const std::vector<std::unique_ptr<Task>> tasks = [] {
    std::vector<std::unique_ptr<Task>> all;
    all.push_back(make_matmul_bench_task());
    all.push_back(make_inference_task());
    all.push_back(make_pretrain_task());
    all.push_back(make_squad_task());
    all.push_back(make_glue_task());
    return all;
  }();
  return tasks;
}

std::vector<TaskSchema> task_schemas() {
  std::vector<TaskSchema> schemas;
  for (const auto& task : registered_tasks()) schemas.push_back(task->schema());
  return schemas;
}

const Task& task_named(const RunConfig& config) {
  std::vector<std::string> names;
  for (const auto& task : registered_tasks()) {
    if (task->schema().name == config.task) return *task;
    names.push_back(task->schema().name);
  }
  throw ConfigError(fmt::format("{}: key 'task': unknown task '{}' (tasks: {})",
                                config.locate("task"), config.task, fmt::join(names, ", ")));
}

}  // namespace polyhal::launcher
