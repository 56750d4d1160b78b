#pragma once
// Progress of a training run, one optimizer step at a time: a metrics JSON
// line per step, and a progress line with loss, learning rate, throughput
// and ETA (rewritten in place on a terminal, every log.every steps
// otherwise). Shared by pretrain, squad and glue.
#include <cstdint>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/metrics_writer.hpp"
#include "polyhal/app/progress.hpp"
#include "polyhal/app/training_step.hpp"

namespace polyhal {

class StepProgress {
 public:
  /// A progress line every `log_every` steps (log.every) off a terminal.
  /// `pretraining`: show the MLM and NSP parts of the loss. `device_model`:
  /// the times are host simulation of a modelled device, not throughput.
  StepProgress(std::int64_t log_every, std::int64_t global_batch, bool pretraining,
               bool device_model, MetricsWriter& metrics, ProgressMode mode);
  void operator()(const TrainingStep& step, std::int64_t total_steps);

 private:
  std::int64_t log_every_;
  std::int64_t global_batch_;
  bool pretraining_, device_model_, terminal_, silent_;
  MetricsWriter& metrics_;
  double elapsed_ = 0;
  std::int64_t timed_ = 0;
};

}  // namespace polyhal
