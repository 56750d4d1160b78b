#pragma once
// The metrics of a run, written as they come (a run can be watched with
// tail -f or TensorBoard):
// - --metrics-out: JSON lines, one object per line with a wall-clock "time"
//   (Unix seconds), the last one a summary with at least backend, device,
//   model, precision, seq_len, global_batch and sequences_per_second (null
//   where a task has no such term);
// - --tensorboard DIR: every number of every record as a TensorBoard scalar
//   "<event>/<name>" at the record's step (step records: step/loss,
//   step/learning_rate, step/loss_scale, step/grad_norm,
//   step/sequences_per_second; evaluations: eval/f1, ...; the summary at the
//   last step);
// - --metrics-csv FILE: the same numbers in long form, one per row:
//   time,event,step,name,value.
// Every write is checked and the files are synced with the summary, so a
// full disk or an I/O error stops the run (exit 1, the path and the
// system's reason) instead of leaving a silently truncated file.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/checked_file.hpp"
#include "polyhal/app/tensorboard_writer.hpp"

namespace polyhal {

/// Where a run's metrics go; an empty path is not written.
struct MetricsTargets {
  std::filesystem::path json_lines;
  std::filesystem::path tensorboard_dir;
  std::filesystem::path csv;
};

class MetricsWriter {
 public:
  explicit MetricsWriter(const MetricsTargets& targets);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(nlohmann::json record);
  /// The last record; every file is flushed to the disk before it returns.
  void write_summary(nlohmann::json summary);

 private:
  std::unique_ptr<CheckedFile> json_lines_, csv_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::int64_t last_step_ = 0;
};

}  // namespace polyhal
