#pragma once
// The launcher's subcommands. Each returns the process exit code or throws
// polyhal::Error (whose exit code main() uses).
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "polyhal/app/convert_checkpoint.hpp"
#include "polyhal/app/convert_model.hpp"
#include "polyhal/app/packed_data.hpp"
#include "polyhal/app/prepare_data.hpp"
#include "polyhal/app/progress.hpp"
#include "polyhal/app/task.hpp"

namespace polyhal {

/// How log lines look on stderr (and, with the rank, under mpirun).
inline constexpr const char* kLogPattern = "%Y-%m-%d %H:%M:%S.%e [%l] %v";

/// Options every command understands.
struct CommonOptions {
  std::vector<std::filesystem::path> plugin_paths;
  bool allow_world_writable_plugins = false;
  std::filesystem::path executable_dir;
  /// --log-level was given: it beats the config's log.level.
  bool log_level_given = false;
};

int list_plugins(const CommonOptions& common);
/// `overrides` may set device options: "device.isa=avx2". `options_only`:
/// list each backend's device options (type, default, help) instead.
int list_devices(const CommonOptions& common, const std::optional<std::string>& backend,
                 const std::vector<std::string>& overrides, bool options_only = false);
int validate_config(const CommonOptions& common, const RunOptions& run);

/// The config `run` names, with its overrides and --backend: the one place
/// a RunConfig is made; read-only from here on (the plan holds what the
/// devices decide).
RunConfig loaded_config(const RunOptions& run);
/// `polyhal config show`: every key with its value and origin, and every
/// device option of the selected backend.
int show_config(const CommonOptions& common, const RunOptions& run);
int run_workload(const CommonOptions& common, const RunOptions& run);
/// `polyhal pack`: packs MLPerf HDF5 data and prints efficiency and speed-up.
int pack_data(const PackOptions& options, ProgressMode progress);

/// `polyhal report`: the runs' metrics (files or directories of them) as one
/// HTML page at `output`.
/// `chain`: the runs follow one another on one step axis, in the order given.
int write_run_report(const std::vector<std::string>& inputs, const std::filesystem::path& output,
                     bool chain = false);

/// `polyhal convert`: a TensorFlow checkpoint into a Hugging Face directory;
/// prints what was read and written.
int convert_model(const ConvertOptions& options);
/// `polyhal prepare-data`: text to MLPerf HDF5 (and packed rows when `pack`
/// is given: into OUTPUT/packed); prints what it made.
int prepare_data(const PrepareDataOptions& options, const std::optional<PackOptions>& pack,
                 ProgressMode progress);

/// How long `supervise` waits before it restarts a job.
inline constexpr std::chrono::seconds kRestartDelay{2};
/// `polyhal supervise` (and `run --max-restarts`): runs `command` and, when
/// it ends with a lost replica (exit code 4, or a process killed by a
/// signal), runs it again, at most `max_restarts` times; returns the last
/// exit code. Other failures, and SIGINT/SIGTERM (passed on to the job),
/// end it at once.
int supervise(const std::vector<std::string>& command, int max_restarts);

}  // namespace polyhal
