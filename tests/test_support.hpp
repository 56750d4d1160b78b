#pragma once
// Helpers shared by the tests: temporary directories, running the launcher,
// and loading the plugins built in this tree.
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/backend.hpp"

namespace polyhal::test {

/// A fresh directory (mode 0700) removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  /// Writes `text` to `name` inside the directory and returns its path.
  std::filesystem::path write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
/// Runs a shell command line and captures its output and exit code. A
/// command with `--config /abs/dir/file` runs in /abs/dir (relative paths
/// are relative to the current directory), unless it starts with "cd ".
CommandResult run_command(const std::string& command_line);
/// A serving parser's 400 message (an ApiError of another status fails the
/// test), or "" when it accepted the body.
std::string api_refusal(const std::function<void()>& parse);
/// Runs the polyhal launcher built in this tree with `arguments`.
CommandResult run_polyhal(const std::string& arguments);

/// "mpirun ... -np RANKS PROGRAM" (default: the launcher) with what a
/// single-host, possibly-root CI run needs (Open MPI's allow-run-as-root).
std::string mpirun(int ranks, const std::string& program = "");
/// The in-tree plugin `name` (cpu, ipu, gaudi), loaded from the build tree.
std::shared_ptr<Backend> load_backend(const std::string& name);
std::filesystem::path built_plugin(const std::string& name);
/// The first device of in-tree backend `name`, opened with device options `given`.
std::shared_ptr<Device> first_device(const std::string& name,
                                     const std::map<std::string, std::string>& given = {});

/// Why the CPU plugin on this host cannot compute in bf16 (no AVX-512:
/// oneDNN has no bf16 below it), or nothing when it can: the tests skip
/// their CPU bf16 part by this reason and still run every other backend.
std::optional<std::string> cpu_without_bf16();
/// Why the CPU plugin refuses int8 on this host (no VNNI or AMX-INT8), as
/// `polyhal devices` says it, or nothing when it runs int8.
std::optional<std::string> cpu_without_int8();
/// The largest int8 weight the CPU plugin quantises to on this host:
/// kInt7Max where it runs seven-bit weights (no VNNI, int8.hpp), else kInt8Max.
float cpu_int8_weight_max();

/// BERT tiny with a 64-token vocabulary and `layers` encoder layers: the
/// small model the training tests compare program variants on.
BertConfig small_bert(std::int64_t layers);
/// The learnable pattern data with at most 3 predictions per sequence.
DataSection pattern_data();
/// The last JSON line of a metrics file (the run's summary).
nlohmann::json last_json_line(const std::filesystem::path& metrics);
/// The {"event": EVENT} lines of a metrics file ("step", "eval", ...).
std::vector<nlohmann::json> metric_records(const std::filesystem::path& metrics,
                                           const std::string& event);
/// The {"event": "step"} lines of a metrics file, and their losses.
std::vector<nlohmann::json> step_records(const std::filesystem::path& metrics);
std::vector<double> step_losses(const std::filesystem::path& metrics);
/// Runs `f` and expects a ConfigError whose message contains `fragment`.
void expect_config_error(const std::function<void()>& f, const std::string& fragment);

/// tests/golden/bert_tiny, where the PyTorch scripts write their files.
std::filesystem::path golden_dir();
/// Integer-valued f32 golden tensor (ids, labels) as i32.
std::vector<std::int32_t> as_ints(const HostTensor& tensor);

}  // namespace polyhal::test

namespace polyhal {

/// load_run_config for the registered tasks: a test's shorthand.
inline RunConfig load_task_config(const std::filesystem::path& file,
                                  const std::vector<std::string>& overrides = {}) {
  return load_run_config(file, overrides, task_schemas());
}

}  // namespace polyhal
