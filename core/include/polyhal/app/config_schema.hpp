#pragma once
/// @file config_schema.hpp
/// What a config may hold, declared once per key. A ConfigKey carries its
/// help, the tasks it applies to, how it is read and how its value is shown,
/// so the reader, `polyhal config show`, `polyhal config reference` and
/// docs/config-reference.md all come from the one declaration. Keys form
/// sections (`model`, `batch`, ...); the common sections are declared in
/// core/src/config/, a task's own sections in its folder under
/// core/src/tasks/, and a task names them all in its TaskSchema.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/config_value.hpp"

namespace polyhal {

/// A key that names a place the run writes: check_output_paths checks it
/// exists or can be made, and can be written, before anything runs.
enum class OutputPath { none, file, directory };
/// A key that names something the run reads: check_input_paths checks it
/// exists and can be read before anything runs. `checkpoint`: a file, a
/// directory, or a TensorFlow checkpoint's prefix (PREFIX.index exists).
enum class InputPath { none, file, file_or_directory, checkpoint };

/// What a task does, as far as the common config keys care: a key that
/// applies to some tasks names the trait they share, never a task, so that
/// a new task takes the keys of what it does by declaring its traits.
enum class TaskTrait : std::uint8_t {
  trains,                  ///< optimizer, checkpoint, recompute, pipeline, collective
  reads_pretraining_data,  ///< data.max_predictions, mask_probability, packed
  runs_inference,          ///< times forward passes: model.heads, head, num_labels
  takes_int8,              ///< runs BertInference (inference, evaluation): int8 keys
};

/// "the tasks that train", for messages and the reference.
const char* task_trait_text(TaskTrait trait);

struct ConfigKey {
  std::string path;  ///< "batch.micro"; a one-value section's key is its name ("steps")
  std::string help;  ///< one line: what it does, its values
  /// The tasks it applies to: those with one of `traits`; or, for a task
  /// folder's own section shared by its tasks, those it names in `tasks`;
  /// both empty: every task that reads its section. A key given to another
  /// task is an error naming the tasks it is for.
  std::vector<TaskTrait> traits{};
  std::vector<std::string> tasks{};
  /// Reads the value into the config (checking it); called only when given.
  std::function<void(const ConfigValue&, RunConfig&)> read{};
  /// The value in effect, as YAML text ("" when unset and without default).
  std::function<std::string(const RunConfig&)> value{};
  OutputPath output = OutputPath::none;
  InputPath input = InputPath::none;

  /// The last part of the path ("micro").
  std::string name() const;
};

struct ConfigSection {
  std::string name;  ///< the top-level key ("batch")
  std::vector<ConfigKey> keys{};
  /// A task's own section: puts its defaults into a config (RunConfig::section).
  std::function<void(RunConfig&)> add_defaults{};
  /// Rules across its keys, once the keys given are read (a key that another
  /// key's value requires); `given` is the section as written.
  std::function<void(const ConfigValue& given, RunConfig&)> check{};
  /// The key a single value stands for (`collective: mpi`); for a one-value
  /// section (`steps: 100`) its one key, named as the section.
  std::string shorthand{};
};

/// What a task reads from the config: the common sections it reads (of
/// model, batch, collective, data, optimizer, checkpoint; backend,
/// plugin_paths, device, task and log are read for every task), the
/// sections its folder declares, and which of them it cannot run without.
/// A section present that its task does not read is an error naming file,
/// line and key.
struct TaskSchema {
  std::string name;                   ///< the config key `task`
  std::vector<std::string> sections;  ///< common sections it reads
  std::vector<std::string> required;  ///< sections (common or own) it needs
  std::vector<std::shared_ptr<const ConfigSection>> own{};
  /// Rules across sections, once every section is read (RunConfig::fail).
  std::function<void(const RunConfig&)> check{};
  /// What it does: the common keys of those traits apply to it (a new
  /// training task says {TaskTrait::trains} and takes the training keys).
  std::vector<TaskTrait> traits{};
  /// A training task: where its final weights go as a Hugging Face directory
  /// (an empty path: nowhere); unset: checkpoint.dir/hf when checkpoint.dir
  /// is set. The plan reads it (OutputPlan::export_dir).
  std::function<std::filesystem::path(const RunConfig&)> export_dir{};

  /// Whether the task reads section `name` (common or own).
  bool reads(const std::string& name) const;
  /// Whether it has `trait`.
  bool has(TaskTrait trait) const;
};

/// Backend, plugin_paths, device, task and log (read for every task), then
/// model, batch, collective, data, optimizer and checkpoint, in reading order.
const std::vector<ConfigSection>& common_config_sections();

}  // namespace polyhal
