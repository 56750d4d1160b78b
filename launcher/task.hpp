#pragma once
// The tasks `polyhal run` can run, chosen by the config key `task`. A new
// task is one file under launcher/tasks/ defining a Task, plus its line in
// launcher/task_registry.cpp: the commands (run, validate, mpirun) only go
// through the registry, and the config reader takes the registry's schemas.
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "metrics_writer.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"
#include "report.hpp"

namespace polyhal::launcher {

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
  virtual PlanSummary plan(Device& device, const RunConfig& config) const = 0;
  /// Runs the task (or plans only, with --compile-only) and reports on
  /// stdout and in `metrics`; returns the exit code. `world`: the MPI
  /// communicator when this process is one rank of a job. `devices`: every
  /// device the backend opened, `device` first (a pipelined run puts stage s
  /// on devices[s]).
  virtual int run(Device& device, const RunConfig& config, const RunOptions& run,
                  MetricsWriter& metrics, Communicator* world,
                  const std::vector<Device*>& devices) const = 0;
};

/// Every registered task (task_registry.cpp), built once.
const std::vector<std::unique_ptr<Task>>& registered_tasks();
/// Their schemas, for load_run_config.
std::vector<TaskSchema> task_schemas();
/// The task `config.task` names; ConfigError listing the tasks otherwise.
const Task& task_named(const RunConfig& config);

}  // namespace polyhal::launcher
