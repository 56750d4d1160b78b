#include "tasks/training_run.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "polyhal/app/hf_directory.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

TensorMap read_located_start(const RunConfig& config, const std::string& key,
                             const std::filesystem::path& file, const BertConfig& model,
                             const TaskHead& head) {
  try {
    // A model directory: its model.safetensors or its one TensorFlow checkpoint.
    return read_start_weights(std::filesystem::is_directory(file) ? model_weights_in(file) : file,
                              model, head, config.model.seed);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: key '{}': {}", config.locate(key), key, e.what()));
  }
}

void print_resume(const TrainingJob& job, std::int64_t done, std::int64_t total,
                  const std::filesystem::path& dir) {
  const auto& from = job.resumed();
  if (!from || !job.lead()) return;
  if (done >= total)
    std::cout << fmt::format(
        "  nothing to do: {} is at step {} of {}{} (remove it, or set checkpoint.resume=false, "
        "to train again)\n",
        dir.string(), done, total,
        from->loss ? fmt::format(", final loss {:.4f}", *from->loss) : std::string());
  else
    std::cout << fmt::format("  resuming from step {} of {}: {}\n", done, total,
                             from->checkpoint.string());
}

bool export_due(const TrainingJob& job, const std::filesystem::path& export_dir, std::int64_t done,
                std::int64_t total, int stopped_by_signal) {
  if (!job.lead() || export_dir.empty() || total <= 0 || stopped_by_signal) return false;
  if (total > done) return true;
  const bool whole = std::filesystem::is_regular_file(export_dir / "config.json") &&
                     std::filesystem::is_regular_file(export_dir / "model.safetensors");
  if (total == done && !whole) {
    spdlog::info("the run had finished; writing its missing export {}", export_dir.string());
    return true;
  }
  return false;
}

}  // namespace polyhal
