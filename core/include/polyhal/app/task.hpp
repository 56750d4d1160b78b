#pragma once
/// @file task.hpp
/// The tasks `polyhal run` can run, chosen by the config key `task`. A task
/// is one folder under core/src/tasks/ (its engine, its config sections and
/// its report, which defines the Task) plus its line in
/// core/src/tasks/task_registry.cpp; a program may add more with a
/// TaskRegistration (tests/tasks/echo/ does). The commands (run, validate,
/// config show, config reference, mpirun) only go through the registry.
/// A task gets the config as loaded (never changed after) and the run's
/// plan (run_plan.hpp): what depends on the device is read from the plan.
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/config.hpp"
#include "polyhal/app/html_reports.hpp"
#include "polyhal/app/metrics_writer.hpp"
#include "polyhal/app/progress.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/app/run_report.hpp"
#include "polyhal/app/step_trace.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// What `polyhal run` (and `validate`, `config show`) was asked.
struct RunOptions {
  std::filesystem::path config;
  std::optional<std::string> backend;
  std::vector<std::string> overrides;
  /// Where each override came from, for errors (a recipe's file:line);
  /// empty: the command line's --set.
  std::vector<std::string> override_origins;
  bool compile_only = false;
  std::filesystem::path metrics_out;      ///< JSON lines
  std::filesystem::path tensorboard_dir;  ///< TensorBoard event file goes here
  std::filesystem::path metrics_csv;      ///< long-form CSV of every number
  ProgressMode progress = ProgressMode::automatic;
  /// --profile START:END: a trace of those optimizer steps (step_trace.hpp).
  std::optional<StepWindow> profile;
  std::filesystem::path profile_out;  ///< --profile-out; empty: polyhal-trace.json
  /// --report DIR: DIR/memory.html, the memory plan as a page (html_reports.hpp).
  std::filesystem::path report_dir;
  /// validate --skip-inputs: the config's input files need not exist here.
  bool skip_inputs = false;
  /// Keys whose input an earlier recipe stage writes (not checked before it ran).
  std::vector<std::string> inputs_made_earlier;
  /// Set to a signal's number when SIGINT or SIGTERM asks the run to stop
  /// (the launcher's StopSignals): training stops after the step in
  /// flight, with a checkpoint.
  const std::atomic<int>* stop_signal = nullptr;
  /// Counted up while a training loop reads stop_signal (after each step);
  /// a signal while it is 0 ends the process at once.
  std::atomic<int>* stop_listeners = nullptr;
};

/// Everything a task runs with: the config as loaded, the plan resolved for
/// the opened devices, what the command line asked, and where to report.
struct TaskContext {
  Device& device;  ///< the run's device, devices.front()
  /// Every device the backend opened, `device` first (a pipelined run puts
  /// stage s of replica r on devices[r x S + s] when there are that many).
  std::vector<Device*> devices;
  const RunConfig& config;
  const RunPlan& plan;
  const RunOptions& options;
  MetricsWriter& metrics;  ///< validate: one that writes nowhere
  /// The MPI communicator when this process is one rank of a job.
  Communicator* world = nullptr;
};

class Task {
 public:
  virtual ~Task() = default;
  /// Its name (config key `task`) and the config sections it reads.
  virtual const TaskSchema& schema() const = 0;
  /// Runs one replica per mpirun rank under `collective: mpi`.
  virtual bool multi_process() const { return false; }
  /// The plan-time checks `validate` runs: the program declared on the
  /// opened device, every op checked against its kernels, data opened,
  /// nothing allocated. Returns a one-line summary and whether it fits.
  virtual PlanSummary plan(const TaskContext& context) const = 0;
  /// `validate --report DIR`: the plan per device as a page (html_reports.hpp),
  /// planned as plan() does; nullopt for a task without a model's plan.
  virtual std::optional<MemoryPage> memory_page(const TaskContext& context) const {
    (void)context;
    return std::nullopt;
  }
  /// Runs the task (or plans only, with --compile-only) and reports on
  /// stdout and in the context's metrics; returns the exit code.
  virtual int run(const TaskContext& context) const = 0;
};

/// Adds a task to the registry from outside core/src/tasks/ (a program's own
/// tasks, such as the test task of tests/tasks/echo/): a namespace-scope
/// `const TaskRegistration registered{make_my_task};` in the task's folder,
/// linked into the program. Registrations happen before main();
/// registered_tasks() is built at its first call.
class TaskRegistration {
 public:
  explicit TaskRegistration(std::function<std::unique_ptr<Task>()> make);
};

/// Every registered task (task_registry.cpp), built once.
const std::vector<std::unique_ptr<Task>>& registered_tasks();
/// Their schemas, for load_run_config.
std::vector<TaskSchema> task_schemas();
/// The task `config.task` names; ConfigError listing the tasks otherwise.
const Task& task_named(const RunConfig& config);

}  // namespace polyhal
