#include "polyhal/app/step_progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "polyhal/app/run_report.hpp"

namespace polyhal {

StepProgress::StepProgress(std::int64_t log_every, std::int64_t global_batch, bool pretraining,
                           bool device_model, MetricsWriter& metrics, ProgressMode mode)
    : log_every_(log_every),
      global_batch_(global_batch),
      pretraining_(pretraining),
      device_model_(device_model),
      terminal_(live_progress(mode)),
      silent_(mode == ProgressMode::none),
      metrics_(metrics) {}

void StepProgress::operator()(const TrainingStep& step, std::int64_t total) {
  elapsed_ += step.seconds;
  ++timed_;
  const double per_step = elapsed_ / static_cast<double>(timed_);
  // Packed rows hold more sequences than rows: count what was trained.
  const double sequences =
      static_cast<double>(step.sequences > 0 ? step.sequences : global_batch_) / step.seconds;
  nlohmann::json line{
      {"event", "step"},
      {"step", step.step},
      {"loss", step.loss()},
      {"learning_rate", step.learning_rate},
      {"grad_norm", step.skipped ? nlohmann::json(nullptr) : nlohmann::json(step.grad_norm)},
      {"loss_scale", step.loss_scale},
      {"skipped", step.skipped},
      {device_model_ ? "host_simulation_seconds" : "seconds", step.seconds},
      {"sequences", step.sequences}};
  if (!device_model_) line["sequences_per_second"] = sequences;
  if (pretraining_) {
    line["mlm_loss"] = step.mlm_loss;
    line["nsp_loss"] = step.nsp_loss;
  }
  metrics_.write(line);
  const bool show = step.step % log_every_ == 0 || step.step == total;
  if (silent_ || (!show && !terminal_)) return;
  const std::string text = fmt::format(
      "step {}/{}  loss {:.4f}{}  lr {:.3g}  {}  ETA {}", step.step, total, step.loss(),
      pretraining_ ? fmt::format(" (mlm {:.4f}, nsp {:.4f})", step.mlm_loss, step.nsp_loss) : "",
      step.learning_rate,
      device_model_ ? fmt::format("host simulation {:.2f} s/step", step.seconds)
                    : fmt::format("{:.1f} sequences/s", sequences),
      clock_text(per_step * static_cast<double>(total - step.step)));
  std::cout << (terminal_ ? "\r" : "") << text << (terminal_ && !show ? "" : "\n") << std::flush;
}

}  // namespace polyhal
