// The task registry: one line per task built into polyhal, then the tasks
// a program adds with TaskRegistration.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

std::unique_ptr<Task> make_matmul_bench_task();
std::unique_ptr<Task> make_inference_task();
std::unique_ptr<Task> make_pretrain_task();
std::unique_ptr<Task> make_squad_task();
std::unique_ptr<Task> make_glue_task();

namespace {

/// The registry's one mutable part: filled before main() by TaskRegistration.
std::vector<std::function<std::unique_ptr<Task>()>>& added_tasks() {
  static std::vector<std::function<std::unique_ptr<Task>()>> added;
  return added;
}

}  // namespace

TaskRegistration::TaskRegistration(std::function<std::unique_ptr<Task>()> make) {
  added_tasks().push_back(std::move(make));
}

const std::vector<std::unique_ptr<Task>>& registered_tasks() {
  static const std::vector<std::unique_ptr<Task>> tasks = [] {
    std::vector<std::unique_ptr<Task>> all;
    all.push_back(make_matmul_bench_task());
    all.push_back(make_inference_task());
    all.push_back(make_pretrain_task());
    all.push_back(make_squad_task());
    all.push_back(make_glue_task());
    for (const auto& make : added_tasks()) all.push_back(make());
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
  throw config.error(
      "task", fmt::format("unknown task '{}' (tasks: {})", config.task, fmt::join(names, ", ")));
}

}  // namespace polyhal
